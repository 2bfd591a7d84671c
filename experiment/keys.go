package experiment

import (
	"math"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/schema"
	"github.com/blis-sim/blis/policy"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/simtrace"
	"github.com/blis-sim/blis/sim/workload"
	"github.com/blis-sim/blis/summary"
)

// Decl is one key of the experiment file: its path (a list's elements as
// [*]: "deployment.pools[*].vllm.max_num_seqs") and its declaration.
// Every value a file, a flag or --set gives is decoded by its Key
// (schema.Key.Decode): whole numbers refuse fractions, numbers their
// range, times below 1 µs, strings what Enum does not list; the error
// names the key and where the value came from. The flags' defaults and
// the docs' tables come from the same declarations.
type Decl struct {
	Path string
	Key  *schema.Key
}

// experimentKeys are the keys outside the deployment's: the file's
// version and mode, the workload and the run options.
var experimentKeys = []schema.Key{
	{Name: "version", Type: schema.Int, Default: schema.I(Version), Min: math.MinInt64, Max: math.MaxInt64, Doc: "the file's version; required"},
	{Name: "deployment.mode", Type: schema.String, DefaultText: "inferred", Enum: []string{string(ModeInstance), string(ModeCluster)},
		Doc: "instance: one engine, no router; cluster: the pools behind admission and a router (default: cluster when a key only a cluster has is given)"},
	{Name: "workload.rate_scale", Type: schema.Float, Default: schema.F(1), MinOpen: true, Max: 1e6, Doc: "multiplies every arrival rate of the workload"},
	{Name: "workload.synthetic.requests", Type: schema.Int, Unit: "requests", Default: schema.I(defaultRequests), Min: 1, Max: math.MaxInt64, Doc: "requests the generator sends"},
	{Name: "workload.synthetic.rate", Type: schema.Float, Unit: "requests/s", Default: schema.F(defaultRate), MinOpen: true, Max: schema.Unbounded, Doc: "mean arrival rate"},
	{Name: "workload.synthetic.arrival", Type: schema.String, Default: schema.S(workload.ArrivalPoisson), Enum: []string{workload.ArrivalPoisson, workload.ArrivalGamma}, Doc: "the arrival process"},
	{Name: "workload.synthetic.gamma_cv", Type: schema.Float, Default: schema.F(2), Min: 1e-3, Max: 1e3, Doc: "gamma arrivals: coefficient of variation of the gaps (1 = Poisson)"},
	{Name: "workload.synthetic.prompt_tokens", Type: schema.String, Default: schema.S(defaultPrompt), Doc: "prompt length distribution, a group's shared prefix included"},
	{Name: "workload.synthetic.output_tokens", Type: schema.String, Default: schema.S(defaultOutput), Doc: "output length distribution"},
	{Name: "workload.synthetic.prefix_groups", Type: schema.Int, Unit: "groups", Default: schema.I(8), Min: 0, Max: math.MaxInt32, Doc: "shared-prefix groups (system prompts); 0 for none"},
	{Name: "workload.synthetic.prefix_tokens", Type: schema.Int, Unit: "tokens", Default: schema.I(512), Min: 0, Max: float64(sim.MaxTokens), Doc: "tokens of each group's shared prefix"},
	{Name: "workload.synthetic.prefix_fraction", Type: schema.Float, Default: schema.F(0.5), Min: 0, Max: 1, Doc: "share of requests that start with a group prefix"},
	{Name: "workload.spec_file", Type: schema.String, Doc: "a workload spec file (docs/workloads.md)"},
	{Name: "workload.scenario", Type: schema.String, Doc: "a built-in workload spec: " + strings.Join(workload.Scenarios(), ", ")},
	{Name: "workload.replay.path", Type: schema.String, Doc: "the trace to replay"},
	{Name: "workload.replay.format", Type: schema.String, Default: schema.S(workload.FormatAuto), Enum: workload.ReplayFormats(), Doc: "the trace's format"},
	{Name: "workload.replay.strict", Type: schema.Bool, Doc: "fail on the first unreadable row instead of counting it as skipped"},
	{Name: "run.seed", Type: schema.Int, Default: schema.I(defaultSeed), Min: math.MinInt64, Max: math.MaxInt64, Doc: "every random stream derives from it"},
	{Name: "run.horizon_s", Type: schema.Float, Unit: "s", Min: 0, Max: float64(sim.MaxTimeUs / 1_000_000), Doc: "stop after this many simulated seconds (0: serve every request)"},
	{Name: "run.per_request", Type: schema.Bool, Doc: "one record per request in the report"},
	{Name: "run.debug_invariants", Type: schema.Bool, Doc: "check every invariant in full after every step (slow)"},
	{Name: "run.workers", Type: schema.Int, Unit: "goroutines", Min: 0, Max: 1 << 16, Doc: "goroutines advancing instances between cluster events (0: one per CPU)"},
	{Name: "run.trace_level", Type: schema.String, Default: schema.S(string(TraceNone)), Enum: []string{string(TraceNone), string(TraceDecisions), string(TraceDetailed)},
		Doc: "how much of the run's decisions run.outputs.decision_trace gets"},
	{Name: "run.counterfactual_k", Type: schema.Int, Unit: "candidates", Default: schema.I(3), Min: 0, Max: 1 << 10, Doc: "candidates recorded per routing decision; alternatives simulated per sampled decision"},
	{Name: "run.counterfactual_sample", Type: schema.String, Default: schema.S("0"), Doc: "routing decisions whose TTFT regret is simulated: a rate in (0, 1] or every:N (0: none)"},
	{Name: "run.summary_max_tokens", Type: schema.Int, Unit: "tokens", Default: schema.I(summary.DefaultMaxTokens), Min: summary.MinMaxTokens, Max: summary.MaxMaxTokens, Doc: "the summary's budget"},
	{Name: "run.window", Type: schema.String, DefaultText: "none", Doc: "a duration with a unit (5s, 500ms; whole µs) that cuts the run into time windows"},
	{Name: "run.warmup", Type: schema.String, Default: schema.S(DefaultWarmup), Doc: "the warm-up removed before the steady-state estimates: auto (MSER-5), none, or a duration (docs/statistics.md)"},
	{Name: "run.precision", Type: schema.Float, Min: math.Inf(-1), Max: math.Inf(1), Doc: "size the run by its precision: the 95 % interval's half-width as a share of the estimate (0: the workload's length)"},
	{Name: "run.precision_metric", Type: schema.String, Default: schema.S(DefaultPrecisionMetric), Doc: "the metric run.precision watches"},
	{Name: "run.max_requests", Type: schema.Int, Unit: "requests", Default: schema.I(DefaultMaxRequests), Min: 1, Max: math.MaxInt32, Doc: "run.precision: stop after this many arrivals"},
	{Name: "run.max_sim_time", Type: schema.String, Default: schema.S(DefaultMaxSimTime), Doc: "run.precision: stop after this much simulated time (a duration)"},
	{Name: "run.otlp.journey_sample_rate", Type: schema.Float, Default: schema.F(simtrace.DefaultOptions().JourneySampleRate), Min: 0, Max: 1, Doc: "vLLM --journey-tracing-sample-rate"},
	{Name: "run.otlp.step_sample_rate", Type: schema.Float, Default: schema.F(simtrace.DefaultOptions().StepSampleRate), Min: 0, Max: 1, Doc: "vLLM --step-tracing-sample-rate"},
	{Name: "run.otlp.rich_subsample_rate", Type: schema.Float, Default: schema.F(simtrace.DefaultOptions().RichSubsampleRate), Min: 0, Max: 1, Doc: "vLLM --step-tracing-rich-subsample-rate"},
	{Name: "run.otlp.closure_interval", Type: schema.Int, Unit: "steps", Default: schema.I(simtrace.DefaultClosureInterval), Min: 10, Max: 10000, Doc: "vLLM --step-tracing-closure-interval"},
	{Name: "run.otlp.max_events_per_span", Type: schema.Int, Unit: "events", Default: schema.I(simtrace.DefaultMaxEventsPerSpan), Min: 1, Max: math.MaxInt32, Doc: "the OpenTelemetry SDK's OTEL_SPAN_EVENT_COUNT_LIMIT"},
	{Name: "run.otlp.route", Type: schema.String, Default: schema.S(simtrace.RouteCompletions), Enum: []string{simtrace.RouteCompletions, simtrace.RouteChatCompletions}, Doc: "the HTTP route the trace shows"},
	{Name: "run.outputs.otlp_trace", Type: schema.String, Doc: "the run as vLLM's OTLP traces (JSON lines)"},
	{Name: "run.outputs.kv_events", Type: schema.String, Doc: "KV offload events (instance mode, with CPU KV blocks)"},
	{Name: "run.outputs.decision_trace", Type: schema.String, Doc: "the decision trace (JSON lines)"},
	{Name: "run.outputs.summary", Type: schema.String, Doc: "the run's Markdown summary"},
	{Name: "run.outputs.window_out", Type: schema.String, Doc: "time windows, .csv or .jsonl"},
	{Name: "run.outputs.window_plot", Type: schema.String, Doc: "time windows, .png, .svg or .pdf"},
}

// Defaults of the synthetic workload and the run.
const (
	defaultRequests = 1000
	defaultRate     = 8
	defaultSeed     = 42
)

// Keys lists every key of the experiment file, in the docs' order.
var Keys = func() []Decl {
	var out []Decl
	add := func(prefix string, keys []schema.Key) {
		for i := range keys {
			out = append(out, Decl{Path: prefix + keys[i].Name, Key: &keys[i]})
		}
	}
	add("", experimentKeys[:2])
	add("deployment.pools[*].", deploy.PoolKeys)
	add("deployment.router.", deploy.RouterKeys)
	add("deployment.network.", deploy.NetworkKeys)
	add("deployment.kv_store.", deploy.KVStoreKeys)
	add("", experimentKeys[2:])
	return out
}()

var byPath = func() map[string]*schema.Key {
	m := make(map[string]*schema.Key, len(Keys))
	for _, d := range Keys {
		m[d.Path] = d.Key
	}
	// A deployment file's routing.prefix_index_capacity is the routing
	// templates' parameter (legacyKey).
	m["legacy.prefix_index_capacity"] = paramKey(policy.Routing, route.WeightedName, "prefix_index_capacity")
	return m
}()

var index = regexp.MustCompile(`\[[0-9]+\]`)

// declOf is the declaration of key (a list's indices any number), or nil
// for a key that has none (a policy's parameters, an inline workload
// spec, the fitness weights: their own decoders check them).
func declOf(key string) *schema.Key {
	return byPath[index.ReplaceAllString(key, "[*]")]
}

// checkValues decodes every value of the file's tree n (at key path at)
// that has a declaration, so that each is refused with its key before
// anything reads it. lookup turns the file's key into the experiment's
// (identity for an experiment file; a deployment file's pools[i].x is
// deployment.pools[i].x).
func checkValues(n *yaml.Node, at string, lookup func(string) string) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if at != "" {
		if k := declOf(lookup(at)); k != nil {
			_, err := k.Decode(n, at)
			return err
		}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := checkValues(c, at, lookup); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if at != "" {
				key = at + "." + key
			}
			if err := checkValues(n.Content[i+1], key, lookup); err != nil {
				return err
			}
		}
		return nil
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := checkValues(c, at+"["+itoa(i)+"]", lookup); err != nil {
				return err
			}
		}
	}
	return nil
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}

// same is the identity lookup of an experiment file's keys.
func same(k string) string { return k }

// keyDefault is key's declared default, as a flag shows it ("" when it
// has none to show: a default computed from other keys).
func keyDefault(key string) string {
	k := declOf(key)
	if k == nil {
		panic("experiment: no key " + key)
	}
	if k.DefaultText != "" {
		return ""
	}
	return k.DefaultString()
}

// WholeNumber reports whether key (a list's index any number) takes whole
// numbers only, and whether it is a declared key at all.
func WholeNumber(key string) (whole, declared bool) {
	k := declOf(key)
	if k == nil {
		return false, false
	}
	return k.Type == schema.Int, true
}
