package autoscale

import (
	"github.com/blis-sim/blis/internal/plugin"
	"github.com/blis-sim/blis/internal/schema"
	"github.com/blis-sim/blis/internal/units"
)

// Defaults of the autoscalers, each declared once: the templates'
// parameters and the Default* configurations read them.
const (
	// Kubernetes' HorizontalPodAutoscaler (autoscaling/v2): the
	// controller's sync period (--horizontal-pod-autoscaler-sync-period),
	// its tolerance (--horizontal-pod-autoscaler-tolerance) and the API's
	// default behavior (kubernetes.io, "Horizontal Pod Autoscaling":
	// Default Behavior).
	DefaultHPAIntervalS     = 15
	DefaultHPATolerance     = 0.1
	DefaultHPAUpWindowS     = 0
	DefaultHPADownWindowS   = 300
	DefaultHPAUpPercent     = 100
	DefaultHPAUpPods        = 4
	DefaultHPAUpPeriodS     = 15
	DefaultHPADownPercent   = 100
	DefaultHPADownPeriodS   = 15
	DefaultSaturationEveryS = 60 // WVA's chart's reconcileInterval
	// llm-d's workload-variant-autoscaler saturation analyzer (v2):
	// kvCacheThreshold, ScaleUpThreshold, ScaleDownBoundary,
	// queueLengthThreshold.
	DefaultKVThreshold    = 0.8
	DefaultScaleUp        = 0.85
	DefaultScaleDown      = 0.70
	DefaultQueueThreshold = 5
	// Knative Serving's config-autoscaler: tick-interval,
	// container-concurrency-target-default 100 ×
	// container-concurrency-target-percentage 70 %, stable-window,
	// panic-window-percentage 10 % of it, panic-threshold-percentage
	// 200 %, max-scale-up-rate, max-scale-down-rate.
	DefaultKPAIntervalS     = 2
	DefaultKPATarget        = 70
	DefaultStableWindowS    = 60
	DefaultPanicWindowS     = 6
	DefaultPanicThreshold   = 2
	DefaultMaxScaleUpRate   = 1000
	DefaultMaxScaleDownRate = 2
	// The threshold templates (docs/autoscaling.md): up 0.8, down 0.3,
	// cooldown 60 s; a queue over its threshold for 60 s scales up.
	DefaultThresholdCooldownS = 60
)

// Builder is a built autoscale section: New makes one policy per pool
// (nil for none: a fixed fleet), evaluated every IntervalUs.
type Builder struct {
	New        func() Policy
	IntervalUs int64
}

// pInterval is an autoscale template's evaluation interval.
func pInterval(def float64, what string) schema.Key {
	return schema.Key{Name: "interval_s", Type: schema.Float, Unit: "s", Doc: "the policy is evaluated this often, per pool (default " + what + ")", Default: schema.F(def), Min: 0.001, Max: 86400}
}

// pMetric is the metric an HPA or a threshold policy reads.
var pMetric = schema.Key{Name: "metric", Type: schema.String, Doc: "kv_utilization: mean share of KV blocks in use; queue_depth: waiting requests per replica; running: running batch per replica; in_flight: requests routed and not finished per replica; slo_attainment: share of the requests finished since the last evaluation that met their SLO class's targets (higher is better)",
	Default: schema.S(string(MetricKVUtilization)), Enum: metricNames()}

func metricNames() []string {
	out := make([]string, len(Metrics))
	for i, m := range Metrics {
		out[i] = string(m)
	}
	return out
}

// thresholdParams are the threshold templates' step, sustain and cooldown.
func thresholdParams(sustain float64) []schema.Key {
	return []schema.Key{
		{Name: "step", Type: schema.Int, Unit: "replicas", Doc: "replicas added or removed at once", Default: schema.I(1), Min: 1, Max: 1 << 20},
		{Name: "sustain_s", Type: schema.Float, Unit: "s", Doc: "the condition must hold this long (at every evaluation) before acting", Default: schema.F(sustain), Max: 86400},
		{Name: "cooldown_s", Type: schema.Float, Unit: "s", Doc: "no change for this long after one (a threshold autoscaler's cooldown_seconds)", Default: schema.F(DefaultThresholdCooldownS), Max: 86400},
	}
}

// us is a parameter in seconds as µs (the schema refuses a positive time
// below 1 µs, so a positive one stays positive).
func us(p plugin.Params, name string) int64 { return units.SecondsToUs(p.Float(name)) }

func interval(p plugin.Params) int64 { return max(1, us(p, "interval_s")) }

// share reports whether a metric's values are shares in [0, 1], so that
// a target or threshold on it above 1 can never be reached.
func share(m Metric) bool { return m == MetricKVUtilization || m == MetricSLOAttainment }

// Templates are the autoscalers as plug-ins (internal/plugin), in
// documentation order: the default first, the pathological last. Each
// builds a Builder.
var Templates = []plugin.Template{
	{Kind: plugin.Autoscale, Name: "none", Doc: "A fixed fleet: every pool keeps its replicas",
		Build: func(plugin.Params, plugin.Env) (any, error) { return Builder{}, nil }},
	{Kind: plugin.Autoscale, Name: "hpa", Doc: "Kubernetes' HorizontalPodAutoscaler (autoscaling/v2) on one metric, with its defaults: desired = ceil(ready × metric / target) unless within the tolerance; a scale-down takes the highest recommendation of its stabilization window, a scale-up the lowest of its own; rate limits per period",
		Params: []schema.Key{
			pInterval(DefaultHPAIntervalS, "the HPA controller's sync period (--horizontal-pod-autoscaler-sync-period)"),
			pMetric,
			{Name: "target", Type: schema.Float, Unit: "metric's unit", Doc: "the metric's target per ready replica (slo_attainment: the share of requests to keep within their SLO, which scales up when attainment falls under it); defaults: llm-d's saturation thresholds (kvCacheThreshold 0.8, queueLengthThreshold 5) and Knative's concurrency target (100 × 70 %)",
				MinOpen: true, Max: schema.Unbounded,
				DefaultBy: &schema.DefaultBy{Param: "metric", Cases: []schema.Case{{When: "kv_utilization", V: schema.F(DefaultKVThreshold)}, {When: "queue_depth", V: schema.F(DefaultQueueThreshold)}, {When: "in_flight", V: schema.F(DefaultKPATarget)}}}},
			{Name: "tolerance", Type: schema.Float, Doc: "no change while metric/target is within 1 ± tolerance (--horizontal-pod-autoscaler-tolerance)", Default: schema.F(DefaultHPATolerance), Max: 1, MaxOpen: true},
			{Name: "scale_up_window_s", Type: schema.Float, Unit: "s", Doc: "scale-up stabilization window (behavior.scaleUp.stabilizationWindowSeconds)", Default: schema.F(DefaultHPAUpWindowS), Max: 3600},
			{Name: "scale_down_window_s", Type: schema.Float, Unit: "s", Doc: "scale-down stabilization window (behavior.scaleDown.stabilizationWindowSeconds)", Default: schema.F(DefaultHPADownWindowS), Max: 3600},
			{Name: "scale_up_percent", Type: schema.Float, Unit: "%", Doc: "a scale-up adds at most this share of the replicas per scale_up_period_s (or scale_up_pods, whichever is more)", Default: schema.F(DefaultHPAUpPercent), MinOpen: true, Max: 1e6},
			{Name: "scale_up_pods", Type: schema.Int, Unit: "replicas", Doc: "a scale-up may always add this many per scale_up_period_s", Default: schema.I(DefaultHPAUpPods), Min: 0, Max: 1 << 20},
			{Name: "scale_up_period_s", Type: schema.Float, Unit: "s", Doc: "the scale-up rate policies' period", Default: schema.F(DefaultHPAUpPeriodS), MinOpen: true, Max: 1800},
			{Name: "scale_down_percent", Type: schema.Float, Unit: "%", Doc: "a scale-down removes at most this share of the replicas per scale_down_period_s", Default: schema.F(DefaultHPADownPercent), MinOpen: true, Max: 100},
			{Name: "scale_down_period_s", Type: schema.Float, Unit: "s", Doc: "the scale-down rate policy's period", Default: schema.F(DefaultHPADownPeriodS), MinOpen: true, Max: 1800},
		},
		Check: func(p plugin.Params) error {
			if m := Metric(p.String("metric")); share(m) && p.Float("target") > 1 {
				return schema.Errorf("params.target", "%s is a share: the target must be within (0, 1], got %s", m, schema.FmtNum(p.Float("target")))
			}
			return nil
		},
		Build: func(p plugin.Params, _ plugin.Env) (any, error) {
			c := DefaultHPA(Metric(p.String("metric")), p.Float("target"))
			c.Tolerance = p.Float("tolerance")
			c.UpWindowUs, c.DownWindowUs = us(p, "scale_up_window_s"), us(p, "scale_down_window_s")
			c.UpPercent, c.UpPods, c.UpPeriodUs = p.Float("scale_up_percent"), int(p.Int("scale_up_pods")), us(p, "scale_up_period_s")
			c.DownPercent, c.DownPeriodUs = p.Float("scale_down_percent"), us(p, "scale_down_period_s")
			return Builder{New: func() Policy { return NewHPA(c) }, IntervalUs: interval(p)}, nil
		}},
	{Kind: plugin.Autoscale, Name: "saturation", Doc: "llm-d's workload-variant-autoscaler saturation analyzer (v2): KV-token demand (tokens in use and queued prompts) against supply (each ready replica's min(KV capacity × kv_threshold, its compute-bound capacity: the tokens in use when the queue is saturated, else the average of the last 10 such observations, else N·(I + O/2), N = min(B·O/(I+O), S))); scale up above scale_up of the supply, down under scale_down; the recommendation goes through an HPA, as WVA's does",
		Params: []schema.Key{
			pInterval(DefaultSaturationEveryS, "WVA's reconcile interval (its chart's reconcileInterval)"),
			{Name: "kv_threshold", Type: schema.Float, Doc: "a replica's usable share of its KV capacity (kvCacheThreshold)", Default: schema.F(DefaultKVThreshold), MinOpen: true, Max: 1},
			{Name: "scale_up", Type: schema.Float, Doc: "scale up when demand exceeds this share of the supply (ScaleUpThreshold)", Default: schema.F(DefaultScaleUp), MinOpen: true, Max: 1},
			{Name: "scale_down", Type: schema.Float, Doc: "scale down when demand is under this share of the supply (ScaleDownBoundary)", Default: schema.F(DefaultScaleDown), Max: 1, MaxOpen: true},
			{Name: "queue_threshold", Type: schema.Float, Unit: "requests", Doc: "waiting requests per replica from which the queue is saturated and the tokens in use are the observed compute-bound capacity (queueLengthThreshold)", Default: schema.F(DefaultQueueThreshold), MinOpen: true, Max: schema.Unbounded},
			{Name: "scale_down_window_s", Type: schema.Float, Unit: "s", Doc: "the scale-down stabilization window of the HPA that actuates WVA's desired replicas (wva_desired_replicas, an external metric; Kubernetes' default; its tolerance 0.1 and rate limits apply too)", Default: schema.F(DefaultHPADownWindowS), Max: 3600},
		},
		Check: func(p plugin.Params) error {
			if p.Float("scale_down") >= p.Float("scale_up") {
				return schema.Errorf("params.scale_down", "must be < scale_up (%s), got %s", schema.FmtNum(p.Float("scale_up")), schema.FmtNum(p.Float("scale_down")))
			}
			return nil
		},
		Build: func(p plugin.Params, _ plugin.Env) (any, error) {
			c := SaturationConfig{KVThreshold: p.Float("kv_threshold"), ScaleUp: p.Float("scale_up"), ScaleDown: p.Float("scale_down"), QueueThreshold: p.Float("queue_threshold")}
			b := DefaultHPA("", 1)
			b.DownWindowUs = us(p, "scale_down_window_s")
			return Builder{New: func() Policy { return NewActuated(NewSaturation(c), b) }, IntervalUs: interval(p)}, nil
		}},
	{Kind: plugin.Autoscale, Name: "queue-depth", Doc: "A threshold policy on the waiting requests per ready replica: add `step` replicas when the queue stays above `up` for `sustain_s`, remove `step` when it stays under `down`; then wait `cooldown_s` (a queue over its threshold for 60 s scales up: docs/autoscaling.md)",
		Params: append([]schema.Key{pInterval(DefaultHPAIntervalS, "the HPA's sync period"),
			{Name: "up", Type: schema.Float, Unit: "requests", Doc: "scale up above this queue per replica (llm-d's queueLengthThreshold)", Default: schema.F(DefaultQueueThreshold), Max: schema.Unbounded},
			{Name: "down", Type: schema.Float, Unit: "requests", Doc: "scale down below this queue per replica (< up: the hysteresis band)", Default: schema.F(0.5), Max: schema.Unbounded},
		}, thresholdParams(60)...),
		Check: checkBand, Build: buildThreshold("queue-depth")},
	{Kind: plugin.Autoscale, Name: "target-utilization", Doc: "A threshold policy on a utilization metric (the threshold template of docs/autoscaling.md: up 0.8, down 0.3, cooldown 60 s): add `step` replicas when the metric stays above `up` for `sustain_s`, remove `step` when under `down`; then wait `cooldown_s`",
		Params: append([]schema.Key{pInterval(DefaultHPAIntervalS, "the HPA's sync period"), pMetric,
			{Name: "up", Type: schema.Float, Unit: "metric's unit", Doc: "scale up above this (slo_attainment: scale down above it)", Default: schema.F(0.8), Max: schema.Unbounded},
			{Name: "down", Type: schema.Float, Unit: "metric's unit", Doc: "scale down below this (slo_attainment: scale up below it); < up", Default: schema.F(0.3), Max: schema.Unbounded},
		}, thresholdParams(0)...),
		Check: func(p plugin.Params) error {
			if err := checkBand(p); err != nil {
				return err
			}
			if m := Metric(p.String("metric")); share(m) && p.Float("up") > 1 {
				return schema.Errorf("params.up", "%s is a share: the threshold must be within [0, 1], got %s", m, schema.FmtNum(p.Float("up")))
			}
			return nil
		},
		Build: buildThreshold("target-utilization")},
	{Kind: plugin.Autoscale, Name: "kpa", Doc: "Knative's pod autoscaler: the pool's concurrency (requests in flight, those waiting at the router included) averaged over a stable and a panic window; desired = average / target; panic when the panic window wants panic_threshold × the ready replicas, then scale on it and never down until a stable window passes",
		Params: []schema.Key{
			pInterval(DefaultKPAIntervalS, "Knative's tick-interval"),
			{Name: "target", Type: schema.Float, Unit: "requests/replica", Doc: "concurrency per replica (container-concurrency-target-default 100 × container-concurrency-target-percentage 70 %)", Default: schema.F(DefaultKPATarget), MinOpen: true, Max: schema.Unbounded},
			{Name: "stable_window_s", Type: schema.Float, Unit: "s", Doc: "the stable window (stable-window)", Default: schema.F(DefaultStableWindowS), MinOpen: true, Max: 3600},
			{Name: "panic_window_s", Type: schema.Float, Unit: "s", Doc: "the panic window (panic-window-percentage 10 % of the stable window)", Default: schema.F(DefaultPanicWindowS), MinOpen: true, Max: 3600},
			{Name: "panic_threshold", Type: schema.Float, Doc: "panic when the panic window wants this many times the ready replicas (panic-threshold-percentage 200 %)", Default: schema.F(DefaultPanicThreshold), Min: 1, Max: 1000},
			{Name: "max_scale_up_rate", Type: schema.Float, Doc: "at most this many times the ready replicas per evaluation (max-scale-up-rate)", Default: schema.F(DefaultMaxScaleUpRate), Min: 1, MinOpen: true, Max: 1e6},
			{Name: "max_scale_down_rate", Type: schema.Float, Doc: "at least the ready replicas over this per evaluation (max-scale-down-rate)", Default: schema.F(DefaultMaxScaleDownRate), Min: 1, MinOpen: true, Max: 1e6},
		},
		Check: func(p plugin.Params) error {
			if us(p, "panic_window_s") > us(p, "stable_window_s") {
				return schema.Errorf("params.panic_window_s", "must be <= stable_window_s (%s s), got %s s", schema.FmtNum(p.Float("stable_window_s")), schema.FmtNum(p.Float("panic_window_s")))
			}
			return nil
		},
		Build: func(p plugin.Params, _ plugin.Env) (any, error) {
			c := KPAConfig{Target: p.Float("target"), StableWindowUs: us(p, "stable_window_s"), PanicWindowUs: us(p, "panic_window_s"),
				PanicThreshold: p.Float("panic_threshold"), MaxUpRate: p.Float("max_scale_up_rate"), MaxDownRate: p.Float("max_scale_down_rate")}
			return Builder{New: func() Policy { return NewKPA(c) }, IntervalUs: interval(p)}, nil
		}},
	{Kind: plugin.Autoscale, Name: "oscillator", Pathological: true, Doc: "Ignores every metric and alternately adds and removes `step` replicas at each evaluation",
		Params: []schema.Key{pInterval(DefaultHPAIntervalS, "the HPA's sync period"),
			{Name: "step", Type: schema.Int, Unit: "replicas", Doc: "replicas added, then removed", Default: schema.I(1), Min: 1, Max: 1 << 20},
		},
		Build: func(p plugin.Params, _ plugin.Env) (any, error) {
			step := int(p.Int("step"))
			return Builder{New: func() Policy { return &Oscillator{Step: step} }, IntervalUs: interval(p)}, nil
		}},
}

// checkBand: a threshold policy's down must be under its up.
func checkBand(p plugin.Params) error {
	if p.Float("down") >= p.Float("up") {
		return schema.Errorf("params.down", "must be < up (%s): the band between them is the hysteresis, got %s", schema.FmtNum(p.Float("up")), schema.FmtNum(p.Float("down")))
	}
	return nil
}

func buildThreshold(name string) func(plugin.Params, plugin.Env) (any, error) {
	return func(p plugin.Params, _ plugin.Env) (any, error) {
		c := ThresholdConfig{Metric: MetricQueueDepth, Up: p.Float("up"), Down: p.Float("down"),
			Step: int(p.Int("step")), SustainUs: us(p, "sustain_s"), CooldownUs: us(p, "cooldown_s")}
		if p.Has("metric") {
			c.Metric = Metric(p.String("metric"))
			c.HigherBetter = c.Metric == MetricSLOAttainment
		}
		return Builder{New: func() Policy { return NewThreshold(name, c) }, IntervalUs: interval(p)}, nil
	}
}
