package workload

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/inputfile"
	"github.com/blis-sim/blis/internal/units"
	"github.com/blis-sim/blis/internal/yamlfile"
	"github.com/blis-sim/blis/sim"
)

// A workload spec file (--workload-spec) describes a mix of tenants. The
// full key reference, with defaults, is docs/workloads.md; the built-in
// scenarios (scenarios/*.yaml) are complete examples.
//
//	version: 1
//	duration_s: 600             # no request is sent after this (either this,
//	requests: 100000            # or a request cap, or both)
//	rate: 20                    # open-loop arrivals per second, shared by weight
//	arrival: {process: poisson} # poisson | gamma | constant | bursty | diurnal
//	load_profile:               # multiplies the rate; outside segments 1
//	  - {type: ramp, start_s: 0, end_s: 60, from: 0.5, to: 2}
//	slo_classes:                # override the published targets
//	  realtime: {ttft_ms: 150}
//	tenants:
//	  - id: chat
//	    weight: 3
//	    slo_class: interactive
//	    request_types:
//	      - {type: chat, weight: 1, turns: "uniform:2,6"}
//
// Unknown keys, wrong types, negative rates and weights that cannot be
// normalized are errors naming the file, line and key.

// Arrival process names.
const (
	ProcessPoisson  = "poisson"
	ProcessGamma    = "gamma"
	ProcessConstant = "constant"
	ProcessBursty   = "bursty"
	ProcessDiurnal  = "diurnal"
)

// Request type names.
const (
	TypeCompletion = "completion"
	TypeChat       = "chat"
	TypeReasoning  = "reasoning"
	TypeAgentic    = "agentic"
)

// Behaviour names.
const (
	BehaviorNormal  = "normal"
	BehaviorBursty  = "bursty"
	BehaviorAbusive = "abusive"
)

// Load profile segment types.
const (
	SegConstant = "constant"
	SegStep     = "step"
	SegRamp     = "ramp"
	SegSpike    = "spike"
)

// Limits on a spec, so that no value can overflow time arithmetic or
// exhaust memory.
const (
	MaxTenants   = 10_000
	maxDurationS = 1e9       // ~31 years of simulated time, far below int64 µs
	maxRate      = 1e7       // requests per second
	maxClients   = 1_000_000 // per tenant and in all (every client is held from the start)
	// MaxBurstSize bounds a burst's sessions, scheduled when it starts.
	MaxBurstSize   = 100_000
	maxPrefixGroup = 1 << 20
)

// SLOTarget is an SLO class's targets in milliseconds; 0 means the class
// has no target on that metric.
type SLOTarget struct {
	TTFTMs float64 `yaml:"ttft_ms" json:"ttft_ms,omitempty"`
	TPOTMs float64 `yaml:"tpot_ms" json:"tpot_ms,omitempty"`
	E2EMs  float64 `yaml:"e2e_ms" json:"e2e_ms,omitempty"`
}

// DefaultSLOTargets are the published targets of the three classes
// (docs/workloads.md says why these values):
//
//	realtime     TTFT 200 ms, TPOT 30 ms          (voice, live agents)
//	interactive  TTFT 1 s,    TPOT 100 ms         (chat: faster than reading)
//	batch        E2E 10 min                       (offline jobs)
func DefaultSLOTargets() [4]SLOTarget {
	var t [4]SLOTarget
	t[sim.SLORealtime] = SLOTarget{TTFTMs: 200, TPOTMs: 30}
	t[sim.SLOInteractive] = SLOTarget{TTFTMs: 1000, TPOTMs: 100}
	t[sim.SLOBatch] = SLOTarget{E2EMs: 600_000}
	return t
}

// WorkloadSpec is a validated spec file.
type WorkloadSpec struct {
	Source      string
	Requests    int64   // total request cap (0: none)
	DurationUs  int64   // no request is sent at or after this (0: none)
	Rate        float64 // open-loop arrivals (conversation starts) per second
	Arrival     Arrival
	Profile     []Segment
	SLO         [4]SLOTarget // by sim.SLOClass
	Tenants     []Tenant
	totalWeight float64
}

// Arrival is an arrival process. Poisson, bursty and diurnal are
// (non-homogeneous) Poisson processes; gamma and constant are renewal
// processes and take no time-varying rate.
type Arrival struct {
	Process string
	CV      float64 // gamma: coefficient of variation of the gaps
	// Bursty: every BurstIntervalUs the rate is multiplied by
	// BurstMultiplier for BurstDurationUs, starting at time 0.
	BurstIntervalUs, BurstDurationUs int64
	BurstMultiplier                  float64
	// Diurnal: rate × (1 + a·sin(2π t / (PeriodUs/TimeCompression))),
	// a = (PeakToTrough − 1)/(PeakToTrough + 1): the mean is the base
	// rate, the peak PeakToTrough times the trough. The cycle starts at
	// the mean, rising.
	PeriodUs        int64
	PeakToTrough    float64
	TimeCompression float64
}

// Segment is one piece of a load profile: over [StartUs, EndUs) the rate
// is multiplied by From, rising linearly to To (equal except for ramps).
type Segment struct {
	Type           string
	StartUs, EndUs int64
	From, To       float64
}

// Tenant is one tenant of the mix.
type Tenant struct {
	ID       string
	Weight   float64 // share of the spec's rate (open loop)
	SLOClass sim.SLOClass
	Priority int32
	Arrival  Arrival
	Types    []RequestType
	Prefix   Prefix
	Behavior string
	Burst    Burst
	Abuse    Abuse
	// Clients > 0 makes the tenant closed-loop: that many clients, each
	// sending its next conversation ThinkMs after its previous one ends.
	Clients   int
	ThinkMs   Dist
	TimeoutUs int64 // a client gives up this long after sending (0: never)
	typeCum   []float64
}

// RequestType is one kind of request a tenant sends, with its share.
type RequestType struct {
	Type   string
	Weight float64
	Prompt Dist // the request's own tokens (a shared prefix comes on top)
	Output Dist
	// Conversations of several turns (chat) or calls (agentic).
	Turns     Dist
	NewTokens Dist // user text (chat) or tool output (agentic) added per turn
	ThinkMs   Dist // gap after a turn completes: think time or tool latency
	// Context growth: "linear" (the whole history is re-sent) or
	// "bounded" (truncated to MaxContext tokens).
	Context    string
	MaxContext int64
	Reasoning  Dist // reasoning: tokens added to the output
	multiTurn  bool
}

// Prefix is a tenant's shared system prompts.
type Prefix struct {
	Groups     int
	Tokens     Dist    // each group's prefix length, drawn once per group
	Reuse      float64 // probability that a conversation uses a group prefix
	Popularity string  // "uniform" or "zipf:S"
	zipfS      float64
}

// Burst is the bursty behaviour: with probability Prob an arrival brings
// Size−1 more conversation starts, IntervalMs apart.
type Burst struct {
	Prob       float64
	Size       Dist
	IntervalMs Dist
}

// Abuse is the abusive behaviour: prompts PromptMultiplier times longer,
// arrivals RateMultiplier times more frequent.
type Abuse struct {
	PromptMultiplier, RateMultiplier float64
}

// --- the file's shape ---

type specYAML struct {
	Version     *int               `yaml:"version"`
	Requests    *int64             `yaml:"requests"`
	DurationS   *float64           `yaml:"duration_s"`
	Rate        *float64           `yaml:"rate"`
	Arrival     *arrivalYAML       `yaml:"arrival"`
	LoadProfile []segmentYAML      `yaml:"load_profile"`
	SLOClasses  map[string]sloYAML `yaml:"slo_classes"`
	Tenants     []tenantYAML       `yaml:"tenants"`
}

type arrivalYAML struct {
	Process         *string  `yaml:"process"`
	CV              *float64 `yaml:"cv"`
	BurstIntervalS  *float64 `yaml:"burst_interval_s"`
	BurstDurationS  *float64 `yaml:"burst_duration_s"`
	BurstMultiplier *float64 `yaml:"burst_multiplier"`
	PeriodS         *float64 `yaml:"period_s"`
	PeakToTrough    *float64 `yaml:"peak_to_trough"`
	TimeCompression *float64 `yaml:"time_compression"`
}

type segmentYAML struct {
	Type       *string  `yaml:"type"`
	StartS     *float64 `yaml:"start_s"`
	EndS       *float64 `yaml:"end_s"`
	Multiplier *float64 `yaml:"multiplier"`
	From       *float64 `yaml:"from"`
	To         *float64 `yaml:"to"`
}

type sloYAML struct {
	TTFTMs *float64 `yaml:"ttft_ms"`
	TPOTMs *float64 `yaml:"tpot_ms"`
	E2EMs  *float64 `yaml:"e2e_ms"`
}

type tenantYAML struct {
	ID           *string           `yaml:"id"`
	Weight       *float64          `yaml:"weight"`
	SLOClass     *string           `yaml:"slo_class"`
	Priority     *int32            `yaml:"priority"`
	Arrival      *arrivalYAML      `yaml:"arrival"`
	PromptTokens *string           `yaml:"prompt_tokens"`
	OutputTokens *string           `yaml:"output_tokens"`
	RequestTypes []requestTypeYAML `yaml:"request_types"`
	Prefix       *prefixYAML       `yaml:"prefix"`
	Behavior     *string           `yaml:"behavior"`
	Burst        *burstYAML        `yaml:"burst"`
	Abusive      *abuseYAML        `yaml:"abusive"`
	ClosedLoop   *closedLoopYAML   `yaml:"closed_loop"`
	TimeoutS     *float64          `yaml:"timeout_s"`
}

type requestTypeYAML struct {
	Type             *string  `yaml:"type"`
	Weight           *float64 `yaml:"weight"`
	PromptTokens     *string  `yaml:"prompt_tokens"`
	OutputTokens     *string  `yaml:"output_tokens"`
	Turns            *string  `yaml:"turns"`
	NewTokens        *string  `yaml:"new_tokens"`
	ThinkTimeMs      *string  `yaml:"think_time_ms"`
	Context          *string  `yaml:"context"`
	MaxContextTokens *int64   `yaml:"max_context_tokens"`
	ReasoningTokens  *string  `yaml:"reasoning_tokens"`
	Calls            *string  `yaml:"calls"`
	ToolLatencyMs    *string  `yaml:"tool_latency_ms"`
	ToolOutputTokens *string  `yaml:"tool_output_tokens"`
}

type prefixYAML struct {
	Groups           *int     `yaml:"groups"`
	Tokens           *string  `yaml:"tokens"`
	ReuseProbability *float64 `yaml:"reuse_probability"`
	Popularity       *string  `yaml:"popularity"`
}

type burstYAML struct {
	Probability *float64 `yaml:"probability"`
	Size        *string  `yaml:"size"`
	IntervalMs  *string  `yaml:"interval_ms"`
}

type abuseYAML struct {
	PromptMultiplier *float64 `yaml:"prompt_multiplier"`
	RateMultiplier   *float64 `yaml:"rate_multiplier"`
}

type closedLoopYAML struct {
	Clients     *int    `yaml:"clients"`
	ThinkTimeMs *string `yaml:"think_time_ms"`
}

var specMappings = map[string]yamlfile.Mapping{
	"workload.specYAML":        {What: "the top level", Keys: reflect.TypeOf(specYAML{})},
	"workload.arrivalYAML":     {What: "arrival", Keys: reflect.TypeOf(arrivalYAML{})},
	"workload.segmentYAML":     {What: "a load profile segment", Keys: reflect.TypeOf(segmentYAML{})},
	"workload.sloYAML":         {What: "an SLO class", Keys: reflect.TypeOf(sloYAML{})},
	"workload.tenantYAML":      {What: "a tenant", Keys: reflect.TypeOf(tenantYAML{})},
	"workload.requestTypeYAML": {What: "a request type", Keys: reflect.TypeOf(requestTypeYAML{})},
	"workload.prefixYAML":      {What: "prefix", Keys: reflect.TypeOf(prefixYAML{})},
	"workload.burstYAML":       {What: "burst", Keys: reflect.TypeOf(burstYAML{})},
	"workload.abuseYAML":       {What: "abusive", Keys: reflect.TypeOf(abuseYAML{})},
	"workload.closedLoopYAML":  {What: "closed_loop", Keys: reflect.TypeOf(closedLoopYAML{})},
}

// Defaults of a request type, by type (docs/workloads.md).
var typeDefaults = map[string]requestTypeYAML{
	TypeCompletion: {},
	TypeChat:       {Turns: ptr("uniform:2,8"), NewTokens: ptr("lognormal:mean=128,cv=1"), ThinkTimeMs: ptr("exponential:mean=10000"), Context: ptr("linear")},
	TypeReasoning:  {ReasoningTokens: ptr("lognormal:mean=2048,cv=0.6")},
	TypeAgentic:    {Calls: ptr("uniform:3,8"), ToolOutputTokens: ptr("lognormal:mean=256,cv=1"), ToolLatencyMs: ptr("lognormal:mean=500,cv=1"), Context: ptr("linear")},
}

// Defaults of a tenant's token lengths when neither the tenant nor the
// request type gives them.
const (
	defaultPrompt = "lognormal:mean=512,cv=0.8"
	defaultOutput = "lognormal:mean=256,cv=0.8"
)

func ptr[T any](v T) *T { return &v }

// LoadSpec reads and validates a workload spec file.
func LoadSpec(path string) (*WorkloadSpec, error) {
	data, err := inputfile.Read(path)
	if err != nil {
		return nil, err
	}
	return ParseSpec(data, path)
}

// ParseSpec reads a spec file's bytes; source names it in errors.
func ParseSpec(data []byte, source string) (*WorkloadSpec, error) {
	var f specYAML
	doc, err := yamlfile.Decode(data, source, &f, specMappings)
	if err != nil {
		return nil, err
	}
	p := specParser{doc: doc}
	return p.spec(&f)
}

// ParseSpecNode reads a spec written inside another YAML file (an
// experiment file's workload.spec): n is its mapping, source the file and
// prefix its key path there, which errors name with the file's lines.
func ParseSpecNode(n *yaml.Node, source, prefix string) (*WorkloadSpec, error) {
	var f specYAML
	doc, err := yamlfile.DecodeNode(n, source, prefix, &f, specMappings)
	if err != nil {
		return nil, err
	}
	if f.Version == nil {
		f.Version = ptr(1) // the experiment file around it has the version
	}
	p := specParser{doc: doc}
	s, err := p.spec(&f)
	if err != nil {
		return nil, err
	}
	s.Source = source + " (" + prefix + ")"
	return s, nil
}

type specParser struct{ doc *yamlfile.Doc }

func (p *specParser) errf(key, format string, args ...any) error {
	return p.doc.Errorf(key, format, args...)
}

// seconds converts a duration in seconds to µs, refusing what cannot be
// one.
func (p *specParser) seconds(key string, v float64, positive bool) (int64, error) {
	if !(v >= 0) || v > maxDurationS || (positive && v == 0) {
		return 0, p.errf(key, "must be a number of seconds in %s, %g], got %g", map[bool]string{true: "(0", false: "[0"}[positive], float64(maxDurationS), v)
	}
	us := units.SecondsToUs(v)
	if v > 0 && us == 0 {
		// Validated after rounding: the simulator's clock counts whole
		// microseconds, and 0 would mean none.
		return 0, p.errf(key, "%g s rounds to 0 µs (the clock's unit), which would mean none; give at least 1e-06", v)
	}
	return us, nil
}

func (p *specParser) dist(key string, s *string, def string) (Dist, error) {
	v := def
	if s != nil {
		v = *s
	}
	d, err := ParseDist(v)
	if err != nil {
		return Dist{}, p.errf(key, "%v", err)
	}
	return d, nil
}

func (p *specParser) spec(f *specYAML) (*WorkloadSpec, error) {
	s := &WorkloadSpec{Source: p.doc.Source, SLO: DefaultSLOTargets()}
	if f.Version == nil || *f.Version != 1 {
		return nil, p.errf("version", "must be 1 (the only spec version)")
	}
	if f.Requests != nil {
		if *f.Requests <= 0 || *f.Requests > math.MaxInt32*int64(1024) {
			return nil, p.errf("requests", "must be in [1, %d], got %d", math.MaxInt32*int64(1024), *f.Requests)
		}
		s.Requests = *f.Requests
	}
	if f.DurationS != nil {
		var err error
		if s.DurationUs, err = p.seconds("duration_s", *f.DurationS, true); err != nil {
			return nil, err
		}
	}
	if s.Requests == 0 && s.DurationUs == 0 {
		return nil, p.errf("duration_s", "give duration_s or requests (or both), so the workload ends")
	}
	s.Rate = 1
	if f.Rate != nil {
		if !(*f.Rate >= 0) || *f.Rate > maxRate {
			return nil, p.errf("rate", "must be requests per second in [0, %g], got %g", float64(maxRate), *f.Rate)
		}
		s.Rate = *f.Rate
	}
	var err error
	if s.Arrival, err = p.arrival("arrival", f.Arrival, Arrival{Process: ProcessPoisson}); err != nil {
		return nil, err
	}
	if s.Profile, err = p.profile(f.LoadProfile); err != nil {
		return nil, err
	}
	classNames := make([]string, 0, len(f.SLOClasses))
	for name := range f.SLOClasses {
		classNames = append(classNames, name)
	}
	slices.Sort(classNames) // the first error is the same on every run
	for _, name := range classNames {
		t := f.SLOClasses[name]
		cl, err := sim.ParseSLOClass(name)
		if err != nil || cl == sim.SLONone {
			return nil, p.errf("slo_classes."+name, "not a class; use realtime, interactive or batch")
		}
		for _, v := range []struct {
			key string
			src *float64
			dst *float64
		}{{"ttft_ms", t.TTFTMs, &s.SLO[cl].TTFTMs}, {"tpot_ms", t.TPOTMs, &s.SLO[cl].TPOTMs}, {"e2e_ms", t.E2EMs, &s.SLO[cl].E2EMs}} {
			if v.src == nil {
				continue
			}
			if !(*v.src >= 0) || *v.src > maxDurationS*1e3 {
				return nil, p.errf("slo_classes."+name+"."+v.key, "must be milliseconds >= 0 (0: no target), got %g", *v.src)
			}
			if *v.src > 0 && math.Round(*v.src*1e3) == 0 {
				return nil, p.errf("slo_classes."+name+"."+v.key, "%g ms rounds to 0 µs, which means no target; give at least 0.001", *v.src)
			}
			*v.dst = *v.src
		}
	}
	if len(f.Tenants) == 0 {
		return nil, p.errf("tenants", "at least one tenant is required")
	}
	if len(f.Tenants) > MaxTenants {
		return nil, p.errf("tenants", "at most %d tenants, got %d", MaxTenants, len(f.Tenants))
	}
	groups := 0
	var clients int64
	for i := range f.Tenants {
		t, err := p.tenant(fmt.Sprintf("tenants[%d]", i), &f.Tenants[i], s)
		if err != nil {
			return nil, err
		}
		for _, o := range s.Tenants {
			if o.ID == t.ID {
				return nil, p.errf(fmt.Sprintf("tenants[%d].id", i), "tenant %q is listed twice", clip.String(t.ID))
			}
		}
		clients += int64(t.Clients)
		if clients > maxClients {
			return nil, p.errf(fmt.Sprintf("tenants[%d].closed_loop.clients", i), "the spec's closed-loop clients total %d from the first %d tenants; at most %d in all", clients, i+1, maxClients)
		}
		groups += t.Prefix.Groups
		if groups > maxPrefixGroup {
			return nil, p.errf(fmt.Sprintf("tenants[%d].prefix.groups", i), "the spec has more than %d prefix groups", maxPrefixGroup)
		}
		if t.Clients == 0 {
			s.totalWeight += t.Weight
		}
		s.Tenants = append(s.Tenants, t)
	}
	open := 0
	for _, t := range s.Tenants {
		if t.Clients == 0 {
			open++
		}
	}
	if open > 0 && !(s.totalWeight > 0) || math.IsInf(s.totalWeight, 0) {
		return nil, p.errf("tenants", "the open-loop tenants' weights sum to %g; they must sum to a finite number > 0 to share the rate", s.totalWeight)
	}
	if open == 0 {
		// Closed-loop tenants send at their clients' pace: the rate, the
		// arrival process and the load profile would be ignored.
		for _, k := range []struct {
			key string
			set bool
		}{{"rate", f.Rate != nil}, {"arrival", f.Arrival != nil}, {"load_profile", f.LoadProfile != nil}} {
			if k.set {
				return nil, p.errf(k.key, "applies to open-loop tenants only; every tenant of this spec is closed-loop (closed_loop), sending at its clients' pace")
			}
		}
	}
	return s, nil
}

func (p *specParser) arrival(key string, a *arrivalYAML, base Arrival) (Arrival, error) {
	if a == nil {
		return base, nil
	}
	out := base
	if a.Process != nil {
		// A new process starts from its own defaults.
		out = Arrival{Process: strings.ToLower(*a.Process)}
	}
	switch out.Process {
	case ProcessPoisson, ProcessConstant:
	case ProcessGamma:
		if out.CV == 0 {
			out.CV = 2
		}
	case ProcessBursty:
		if out.BurstIntervalUs == 0 {
			out.BurstIntervalUs, out.BurstDurationUs, out.BurstMultiplier = 60e6, 5e6, 10
		}
	case ProcessDiurnal:
		if out.PeriodUs == 0 {
			out.PeriodUs, out.PeakToTrough, out.TimeCompression = 86_400e6, 10, 1
		}
	default:
		return out, p.errf(key+".process", "%q is not a process; use poisson, gamma, constant, bursty or diurnal", clip.String(out.Process))
	}
	num := func(k string, v *float64, dst *float64, lo, hi float64) error {
		if v == nil {
			return nil
		}
		if !(*v >= lo && *v <= hi) {
			return p.errf(key+"."+k, "must be in [%g, %g], got %g", lo, hi, *v)
		}
		*dst = *v
		return nil
	}
	only := func(k string, set bool, proc string) error {
		if set && out.Process != proc {
			return p.errf(key+"."+k, "applies to the %s process only, not %s", proc, out.Process)
		}
		return nil
	}
	for _, c := range []error{
		only("cv", a.CV != nil, ProcessGamma),
		only("burst_interval_s", a.BurstIntervalS != nil, ProcessBursty),
		only("burst_duration_s", a.BurstDurationS != nil, ProcessBursty),
		only("burst_multiplier", a.BurstMultiplier != nil, ProcessBursty),
		only("period_s", a.PeriodS != nil, ProcessDiurnal),
		only("peak_to_trough", a.PeakToTrough != nil, ProcessDiurnal),
		only("time_compression", a.TimeCompression != nil, ProcessDiurnal),
		num("cv", a.CV, &out.CV, 1e-3, 1e3),
		num("burst_multiplier", a.BurstMultiplier, &out.BurstMultiplier, 0, 1000),
		num("peak_to_trough", a.PeakToTrough, &out.PeakToTrough, 1, 1e6),
		num("time_compression", a.TimeCompression, &out.TimeCompression, 1e-6, 1e9),
	} {
		if c != nil {
			return out, c
		}
	}
	var err error
	for _, c := range []struct {
		k   string
		v   *float64
		dst *int64
	}{{"burst_interval_s", a.BurstIntervalS, &out.BurstIntervalUs}, {"burst_duration_s", a.BurstDurationS, &out.BurstDurationUs}, {"period_s", a.PeriodS, &out.PeriodUs}} {
		if c.v != nil {
			if *c.dst, err = p.seconds(key+"."+c.k, *c.v, c.k != "burst_duration_s"); err != nil {
				return out, err
			}
		}
	}
	if out.Process == ProcessBursty && out.BurstDurationUs > out.BurstIntervalUs {
		return out, p.errf(key+".burst_duration_s", "the burst (%g s) must not be longer than its interval (%g s)", float64(out.BurstDurationUs)/1e6, float64(out.BurstIntervalUs)/1e6)
	}
	if out.Process == ProcessDiurnal && float64(out.PeriodUs)/out.TimeCompression < 1000 {
		return out, p.errf(key+".time_compression", "compresses the %g s period below 1 ms", float64(out.PeriodUs)/1e6)
	}
	return out, nil
}

func (p *specParser) profile(segs []segmentYAML) ([]Segment, error) {
	var out []Segment
	for i, sy := range segs {
		key := fmt.Sprintf("load_profile[%d]", i)
		if sy.Type == nil {
			return nil, p.errf(key+".type", "required: constant, step, ramp or spike")
		}
		s := Segment{Type: strings.ToLower(*sy.Type)}
		if sy.StartS == nil || sy.EndS == nil {
			return nil, p.errf(key, "start_s and end_s are required")
		}
		var err error
		if s.StartUs, err = p.seconds(key+".start_s", *sy.StartS, false); err != nil {
			return nil, err
		}
		if s.EndUs, err = p.seconds(key+".end_s", *sy.EndS, true); err != nil {
			return nil, err
		}
		if s.EndUs <= s.StartUs {
			return nil, p.errf(key+".end_s", "must be after start_s (%g s), got %g s", *sy.StartS, *sy.EndS)
		}
		if len(out) > 0 && s.StartUs < out[len(out)-1].EndUs {
			return nil, p.errf(key+".start_s", "overlaps the previous segment (ends at %g s); segments must be in time order without overlap", float64(out[len(out)-1].EndUs)/1e6)
		}
		mult := func(k string, v *float64) (float64, error) {
			if v == nil {
				return 0, p.errf(key+"."+k, "required for a %s segment", s.Type)
			}
			if !(*v >= 0) || *v > 1e6 {
				return 0, p.errf(key+"."+k, "must be a rate multiplier in [0, 1e6], got %g", *v)
			}
			return *v, nil
		}
		switch s.Type {
		case SegConstant, SegStep, SegSpike:
			if sy.From != nil || sy.To != nil {
				return nil, p.errf(key, "from and to are for ramp segments; a %s segment takes multiplier", s.Type)
			}
			if s.From, err = mult("multiplier", sy.Multiplier); err != nil {
				return nil, err
			}
			s.To = s.From
		case SegRamp:
			if sy.Multiplier != nil {
				return nil, p.errf(key+".multiplier", "a ramp takes from and to")
			}
			if s.From, err = mult("from", sy.From); err != nil {
				return nil, err
			}
			if s.To, err = mult("to", sy.To); err != nil {
				return nil, err
			}
		default:
			return nil, p.errf(key+".type", "%q is not a segment type; use constant, step, ramp or spike", clip.String(s.Type))
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *specParser) tenant(key string, ty *tenantYAML, s *WorkloadSpec) (Tenant, error) {
	t := Tenant{Weight: 1, SLOClass: sim.SLOInteractive, Behavior: BehaviorNormal}
	if ty.ID == nil || !validID(*ty.ID) {
		return t, p.errf(key+".id", "required: 1-64 letters, digits, '.', '_' or '-'")
	}
	t.ID = *ty.ID
	if ty.Weight != nil {
		if !(*ty.Weight >= 0) || math.IsInf(*ty.Weight, 0) {
			return t, p.errf(key+".weight", "must be a finite number >= 0, got %g", *ty.Weight)
		}
		t.Weight = *ty.Weight
	}
	if ty.SLOClass != nil {
		cl, err := sim.ParseSLOClass(*ty.SLOClass)
		if err != nil || cl == sim.SLONone {
			return t, p.errf(key+".slo_class", "%q is not a class; use realtime, interactive or batch", clip.String(*ty.SLOClass))
		}
		t.SLOClass = cl
	}
	if ty.Priority != nil {
		t.Priority = *ty.Priority
	}
	var err error
	if t.Arrival, err = p.arrival(key+".arrival", ty.Arrival, s.Arrival); err != nil {
		return t, err
	}
	if len(s.Profile) > 0 && (t.Arrival.Process == ProcessGamma || t.Arrival.Process == ProcessConstant) {
		return t, p.errf(key+".arrival.process", "a load profile needs a Poisson-family process (poisson, bursty, diurnal); %s arrivals are a renewal process whose rate cannot vary", t.Arrival.Process)
	}
	if len(ty.RequestTypes) == 0 {
		ty.RequestTypes = []requestTypeYAML{{Type: ptr(TypeCompletion)}}
	}
	var cum float64
	for i := range ty.RequestTypes {
		rt, err := p.requestType(fmt.Sprintf("%s.request_types[%d]", key, i), &ty.RequestTypes[i], ty)
		if err != nil {
			return t, err
		}
		cum += rt.Weight
		t.Types = append(t.Types, rt)
		t.typeCum = append(t.typeCum, cum)
	}
	if !(cum > 0) || math.IsInf(cum, 0) {
		return t, p.errf(key+".request_types", "the weights sum to %g; they must sum to a finite number > 0", cum)
	}
	for i := range t.typeCum {
		t.typeCum[i] /= cum
	}
	t.typeCum[len(t.typeCum)-1] = 1
	if t.Prefix, err = p.prefix(key+".prefix", ty.Prefix); err != nil {
		return t, err
	}
	if ty.Behavior != nil {
		t.Behavior = strings.ToLower(*ty.Behavior)
	}
	switch t.Behavior {
	case BehaviorNormal:
	case BehaviorBursty:
		b := ty.Burst
		if b == nil {
			b = &burstYAML{}
		}
		t.Burst.Prob = 0.1
		if b.Probability != nil {
			if !(*b.Probability >= 0 && *b.Probability <= 1) {
				return t, p.errf(key+".burst.probability", "must be in [0, 1], got %g", *b.Probability)
			}
			t.Burst.Prob = *b.Probability
		}
		if t.Burst.Size, err = p.dist(key+".burst.size", b.Size, "uniform:5,20"); err != nil {
			return t, err
		}
		// A burst's sessions are scheduled when it starts: bound them.
		if n := t.Burst.Size.largest(); n > MaxBurstSize {
			return t, p.errf(key+".burst.size", "can draw bursts of %d sessions; at most %d (bound it with max=%d)", n, MaxBurstSize, MaxBurstSize)
		}
		if t.Burst.IntervalMs, err = p.dist(key+".burst.interval_ms", b.IntervalMs, "exponential:mean=50"); err != nil {
			return t, err
		}
	case BehaviorAbusive:
		t.Abuse = Abuse{PromptMultiplier: 8, RateMultiplier: 10}
		if a := ty.Abusive; a != nil {
			for _, c := range []struct {
				k   string
				v   *float64
				dst *float64
			}{{"prompt_multiplier", a.PromptMultiplier, &t.Abuse.PromptMultiplier}, {"rate_multiplier", a.RateMultiplier, &t.Abuse.RateMultiplier}} {
				if c.v != nil {
					if !(*c.v >= 1 && *c.v <= 1e4) {
						return t, p.errf(key+".abusive."+c.k, "must be in [1, 10000], got %g", *c.v)
					}
					*c.dst = *c.v
				}
			}
		}
	default:
		return t, p.errf(key+".behavior", "%q is not a behaviour; use normal, bursty or abusive", clip.String(t.Behavior))
	}
	if ty.Burst != nil && t.Behavior != BehaviorBursty {
		return t, p.errf(key+".burst", "applies to behavior: bursty only")
	}
	if ty.Abusive != nil && t.Behavior != BehaviorAbusive {
		return t, p.errf(key+".abusive", "applies to behavior: abusive only")
	}
	if cl := ty.ClosedLoop; cl != nil {
		if cl.Clients == nil || *cl.Clients < 1 || *cl.Clients > maxClients {
			return t, p.errf(key+".closed_loop.clients", "required: clients in [1, %d]", maxClients)
		}
		if ty.Weight != nil {
			return t, p.errf(key+".weight", "a closed-loop tenant sends at its clients' pace; it takes no share of the rate")
		}
		t.Clients = *cl.Clients
		t.Weight = 0
		if t.ThinkMs, err = p.dist(key+".closed_loop.think_time_ms", cl.ThinkTimeMs, "exponential:mean=1000"); err != nil {
			return t, err
		}
		if ty.Arrival != nil {
			return t, p.errf(key+".arrival", "a closed-loop tenant has no arrival process")
		}
		// Bursts and the abusive rate multiply arrivals, which a
		// closed-loop tenant does not have.
		if t.Behavior == BehaviorBursty {
			return t, p.errf(key+".behavior", "bursty multiplies arrivals; a closed-loop tenant sends at its clients' pace")
		}
		if ty.Abusive != nil && ty.Abusive.RateMultiplier != nil {
			return t, p.errf(key+".abusive.rate_multiplier", "multiplies the arrival rate; a closed-loop tenant sends at its clients' pace")
		}
	}
	if ty.TimeoutS != nil {
		if t.TimeoutUs, err = p.seconds(key+".timeout_s", *ty.TimeoutS, true); err != nil {
			return t, err
		}
	}
	return t, nil
}

func (p *specParser) requestType(key string, ry *requestTypeYAML, ty *tenantYAML) (RequestType, error) {
	if ry.Type == nil {
		return RequestType{}, p.errf(key+".type", "required: completion, chat, reasoning or agentic")
	}
	rt := RequestType{Type: strings.ToLower(*ry.Type), Weight: 1}
	def, ok := typeDefaults[rt.Type]
	if !ok {
		return rt, p.errf(key+".type", "%q is not a request type; use completion, chat, reasoning or agentic", clip.String(rt.Type))
	}
	if ry.Weight != nil {
		if !(*ry.Weight >= 0) || math.IsInf(*ry.Weight, 0) {
			return rt, p.errf(key+".weight", "must be a finite number >= 0, got %g", *ry.Weight)
		}
		rt.Weight = *ry.Weight
	}
	// Which keys each type takes: the others are errors, not ignored.
	allowed := map[string][]string{
		TypeCompletion: {},
		TypeReasoning:  {"reasoning_tokens"},
		TypeChat:       {"turns", "new_tokens", "think_time_ms", "context", "max_context_tokens"},
		TypeAgentic:    {"calls", "tool_output_tokens", "tool_latency_ms", "context", "max_context_tokens"},
	}[rt.Type]
	for _, k := range []struct {
		name string
		set  bool
	}{{"turns", ry.Turns != nil}, {"new_tokens", ry.NewTokens != nil}, {"think_time_ms", ry.ThinkTimeMs != nil},
		{"context", ry.Context != nil}, {"max_context_tokens", ry.MaxContextTokens != nil}, {"reasoning_tokens", ry.ReasoningTokens != nil},
		{"calls", ry.Calls != nil}, {"tool_output_tokens", ry.ToolOutputTokens != nil}, {"tool_latency_ms", ry.ToolLatencyMs != nil}} {
		if k.set && !slices.Contains(allowed, k.name) {
			return rt, p.errf(key+"."+k.name, "does not apply to a %s request", rt.Type)
		}
	}
	// Token lengths: the request type's, else the tenant's, else the
	// defaults.
	// An error names the key the value came from.
	tenantKey := key[:strings.LastIndex(key, ".request_types[")]
	prompt, output := ty.PromptTokens, ty.OutputTokens
	promptKey, outputKey := tenantKey+".prompt_tokens", tenantKey+".output_tokens"
	if ry.PromptTokens != nil {
		prompt, promptKey = ry.PromptTokens, key+".prompt_tokens"
	}
	if ry.OutputTokens != nil {
		output, outputKey = ry.OutputTokens, key+".output_tokens"
	}
	var err error
	if rt.Prompt, err = p.dist(promptKey, prompt, defaultPrompt); err != nil {
		return rt, err
	}
	if rt.Output, err = p.dist(outputKey, output, defaultOutput); err != nil {
		return rt, err
	}
	first := func(a, b *string) *string {
		if a != nil {
			return a
		}
		return b
	}
	switch rt.Type {
	case TypeCompletion:
		rt.Turns = Dist{Kind: KindConst, Mean: 1}
	case TypeReasoning:
		rt.Turns = Dist{Kind: KindConst, Mean: 1}
		if rt.Reasoning, err = p.dist(key+".reasoning_tokens", first(ry.ReasoningTokens, def.ReasoningTokens), ""); err != nil {
			return rt, err
		}
	case TypeChat, TypeAgentic:
		rt.multiTurn = true
		turnsKey, newKey, thinkKey := "turns", "new_tokens", "think_time_ms"
		turns, newTok, think := first(ry.Turns, def.Turns), first(ry.NewTokens, def.NewTokens), first(ry.ThinkTimeMs, def.ThinkTimeMs)
		if rt.Type == TypeAgentic {
			turnsKey, newKey, thinkKey = "calls", "tool_output_tokens", "tool_latency_ms"
			turns, newTok, think = first(ry.Calls, def.Calls), first(ry.ToolOutputTokens, def.ToolOutputTokens), first(ry.ToolLatencyMs, def.ToolLatencyMs)
		}
		if rt.Turns, err = p.dist(key+"."+turnsKey, turns, ""); err != nil {
			return rt, err
		}
		if rt.NewTokens, err = p.dist(key+"."+newKey, newTok, ""); err != nil {
			return rt, err
		}
		if rt.ThinkMs, err = p.dist(key+"."+thinkKey, think, ""); err != nil {
			return rt, err
		}
		rt.Context = *first(ry.Context, def.Context)
		switch rt.Context {
		case "linear":
			if ry.MaxContextTokens != nil {
				return rt, p.errf(key+".max_context_tokens", "applies to context: bounded only")
			}
		case "bounded":
			if ry.MaxContextTokens == nil || *ry.MaxContextTokens < 2 || *ry.MaxContextTokens >= maxTokens {
				return rt, p.errf(key+".max_context_tokens", "context: bounded needs max_context_tokens in [2, %d]", int64(maxTokens))
			}
			rt.MaxContext = *ry.MaxContextTokens
		default:
			return rt, p.errf(key+".context", "%q is not a context growth; use linear or bounded", clip.String(rt.Context))
		}
	}
	return rt, nil
}

func (p *specParser) prefix(key string, py *prefixYAML) (Prefix, error) {
	pr := Prefix{Popularity: "uniform"}
	if py == nil {
		return pr, nil
	}
	if py.Groups == nil || *py.Groups < 1 || *py.Groups > maxPrefixGroup {
		return pr, p.errf(key+".groups", "required: groups in [1, %d]", maxPrefixGroup)
	}
	pr.Groups = *py.Groups
	var err error
	if pr.Tokens, err = p.dist(key+".tokens", py.Tokens, "512"); err != nil {
		return pr, err
	}
	pr.Reuse = 1
	if py.ReuseProbability != nil {
		if !(*py.ReuseProbability >= 0 && *py.ReuseProbability <= 1) {
			return pr, p.errf(key+".reuse_probability", "must be in [0, 1], got %g", *py.ReuseProbability)
		}
		pr.Reuse = *py.ReuseProbability
	}
	if py.Popularity != nil {
		pr.Popularity = strings.ToLower(strings.TrimSpace(*py.Popularity))
	}
	switch {
	case pr.Popularity == "uniform":
	case strings.HasPrefix(pr.Popularity, "zipf:"):
		v, err := strconv.ParseFloat(strings.TrimPrefix(pr.Popularity, "zipf:"), 64)
		if err != nil || !(v > 0 && v <= 10) {
			return pr, p.errf(key+".popularity", "zipf:S needs an exponent S in (0, 10], got %q", clip.String(pr.Popularity))
		}
		pr.zipfS = v
	default:
		return pr, p.errf(key+".popularity", "%q is not a popularity; use uniform or zipf:S", pr.Popularity)
	}
	return pr, nil
}

func validID(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// TenantIDs lists the tenants' ids in spec order (a request's Tenant is
// an index into it).
func (s *WorkloadSpec) TenantIDs() []string {
	ids := make([]string, len(s.Tenants))
	for i, t := range s.Tenants {
		ids[i] = t.ID
	}
	return ids
}
