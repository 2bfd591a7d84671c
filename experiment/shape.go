package experiment

import (
	"reflect"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/yamlfile"
	"github.com/blis-sim/blis/policy"
)

// The experiment file's shape: every key optional, a nil pointer meaning
// "not given". docs/experiment.md describes every key; the Draft fills
// these from files and flags, Resolve turns them into an Experiment.

type fileYAML struct {
	Version    *int             `yaml:"version"`
	Deployment *deploymentYAML  `yaml:"deployment"`
	Workload   *workloadYAML    `yaml:"workload"`
	Policies   *policy.FileYAML `yaml:"policies"`
	Run        *runYAML         `yaml:"run"`
}

type deploymentYAML struct {
	Mode    *string           `yaml:"mode"`
	Pools   []deploy.PoolYAML `yaml:"pools"`
	Router  *routerYAML       `yaml:"router"`
	Network *networkYAML      `yaml:"network"`
	// KVStore is the KV store the pools share (docs/kv-tiers.md).
	KVStore *deploy.KVStoreYAML `yaml:"kv_store"`
}

// networkYAML is deploy.Network: the KV transfers' links under
// disaggregation.
type networkYAML struct {
	NICGBPerSec   *float64 `yaml:"nic_gb_per_s"`
	Efficiency    *float64 `yaml:"efficiency"`
	LatencyUs     *int64   `yaml:"latency_us"`
	AbortTimeoutS *float64 `yaml:"abort_timeout_s"`
}

type routerYAML struct {
	AdmissionLatencyUs *int64       `yaml:"admission_latency_us"`
	RoutingLatencyUs   *int64       `yaml:"routing_latency_us"`
	SnapshotRefreshUs  *refreshYAML `yaml:"snapshot_refresh_us"`
	// CapacityWaitTimeoutS bounds a request's wait at the router while no
	// instance is ready.
	CapacityWaitTimeoutS *float64 `yaml:"capacity_wait_timeout_s"`
}

// refreshYAML is each instance-reported signal's refresh interval, in
// cluster.Signal order.
type refreshYAML struct {
	QueueDepth    *int64 `yaml:"queue_depth"`
	BatchSize     *int64 `yaml:"batch_size"`
	KVUtilization *int64 `yaml:"kv_utilization"`
	FreeKVBlocks  *int64 `yaml:"free_kv_blocks"`
	CacheHitRate  *int64 `yaml:"cache_hit_rate"`
}

func (r *refreshYAML) signals() []**int64 {
	return []**int64{&r.QueueDepth, &r.BatchSize, &r.KVUtilization, &r.FreeKVBlocks, &r.CacheHitRate}
}

type workloadYAML struct {
	RateScale *float64       `yaml:"rate_scale"`
	Synthetic *syntheticYAML `yaml:"synthetic"`
	Spec      yaml.Node      `yaml:"spec"`
	SpecFile  *string        `yaml:"spec_file"`
	Scenario  *string        `yaml:"scenario"`
	Replay    *replayYAML    `yaml:"replay"`
}

type syntheticYAML struct {
	Requests       *int     `yaml:"requests"`
	Rate           *float64 `yaml:"rate"`
	Arrival        *string  `yaml:"arrival"`
	GammaCV        *float64 `yaml:"gamma_cv"`
	PromptTokens   *string  `yaml:"prompt_tokens"`
	OutputTokens   *string  `yaml:"output_tokens"`
	PrefixGroups   *int     `yaml:"prefix_groups"`
	PrefixTokens   *int64   `yaml:"prefix_tokens"`
	PrefixFraction *float64 `yaml:"prefix_fraction"`
}

type replayYAML struct {
	Path   *string `yaml:"path"`
	Format *string `yaml:"format"`
	Strict *bool   `yaml:"strict"`
}

type runYAML struct {
	Seed            *int64   `yaml:"seed"`
	HorizonS        *float64 `yaml:"horizon_s"`
	PerRequest      *bool    `yaml:"per_request"`
	DebugInvariants *bool    `yaml:"debug_invariants"`
	Workers         *int     `yaml:"workers"`
	TraceLevel      *string  `yaml:"trace_level"`
	CounterfactualK *int     `yaml:"counterfactual_k"`
	// CounterfactualSample is a string or a number (a rate).
	CounterfactualSample *string      `yaml:"counterfactual_sample"`
	SummaryMaxTokens     *int         `yaml:"summary_max_tokens"`
	FitnessWeights       yaml.Node    `yaml:"fitness_weights"`
	Window               *string      `yaml:"window"`
	Warmup               *string      `yaml:"warmup"`
	Precision            *float64     `yaml:"precision"`
	PrecisionMetric      *string      `yaml:"precision_metric"`
	MaxRequests          *int64       `yaml:"max_requests"`
	MaxSimTime           *string      `yaml:"max_sim_time"`
	OTLP                 *otlpYAML    `yaml:"otlp"`
	Outputs              *outputsYAML `yaml:"outputs"`
}

type otlpYAML struct {
	JourneySampleRate *float64 `yaml:"journey_sample_rate"`
	StepSampleRate    *float64 `yaml:"step_sample_rate"`
	RichSubsampleRate *float64 `yaml:"rich_subsample_rate"`
	ClosureInterval   *int64   `yaml:"closure_interval"`
	MaxEventsPerSpan  *int     `yaml:"max_events_per_span"`
	Route             *string  `yaml:"route"`
}

type outputsYAML struct {
	OTLPTrace     *string `yaml:"otlp_trace"`
	KVEvents      *string `yaml:"kv_events"`
	DecisionTrace *string `yaml:"decision_trace"`
	Summary       *string `yaml:"summary"`
	WindowOut     *string `yaml:"window_out"`
	WindowPlot    *string `yaml:"window_plot"`
}

// mappings name the file's mappings in unknown-key errors.
var mappings = func() map[string]yamlfile.Mapping {
	m := map[string]yamlfile.Mapping{
		"experiment.fileYAML":       {What: "the top level", Keys: reflect.TypeOf(fileYAML{})},
		"experiment.deploymentYAML": {What: "deployment", Keys: reflect.TypeOf(deploymentYAML{})},
		"experiment.routerYAML":     {What: "deployment.router", Keys: reflect.TypeOf(routerYAML{})},
		"experiment.refreshYAML":    {What: "deployment.router.snapshot_refresh_us", Keys: reflect.TypeOf(refreshYAML{})},
		"experiment.networkYAML":    {What: "deployment.network", Keys: reflect.TypeOf(networkYAML{})},
		"experiment.workloadYAML":   {What: "workload", Keys: reflect.TypeOf(workloadYAML{})},
		"experiment.syntheticYAML":  {What: "workload.synthetic", Keys: reflect.TypeOf(syntheticYAML{})},
		"experiment.replayYAML":     {What: "workload.replay", Keys: reflect.TypeOf(replayYAML{})},
		"experiment.runYAML":        {What: "run", Keys: reflect.TypeOf(runYAML{})},
		"experiment.otlpYAML":       {What: "run.otlp", Keys: reflect.TypeOf(otlpYAML{})},
		"experiment.outputsYAML":    {What: "run.outputs", Keys: reflect.TypeOf(outputsYAML{})},
	}
	for k, v := range deploy.Mappings {
		m[k] = v
	}
	for k, v := range policy.Mappings {
		m[k] = v
	}
	return m
}()
