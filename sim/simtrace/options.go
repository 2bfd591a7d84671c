package simtrace

import (
	"fmt"

	"github.com/blis-sim/blis/internal/clip"
)

// Routes of the OpenAI-compatible API that the trace can claim.
const (
	RouteCompletions     = "/v1/completions"
	RouteChatCompletions = "/v1/chat/completions"
)

// Defaults. The clocks are fixed so that a trace never depends on when it
// was written.
const (
	DefaultClosureInterval  = 100
	DefaultMaxEventsPerSpan = 128 // the OpenTelemetry SDK's span event limit
	DefaultSpansPerLine     = 512 // BatchSpanProcessor's max_export_batch_size
	DefaultMonoBaseNs       = int64(1_000_000_000_000)
	DefaultWallBaseNs       = int64(1_767_225_600_000_000_000) // 2026-01-01T00:00:00Z
)

// Options are vLLM's tracing switches and how the trace is laid out.
//
// The sample rates are used as given: 0 turns that part of tracing off
// (StepSampleRate 0: no step spans at all). Start from DefaultOptions. The
// other fields take their default when zero.
type Options struct {
	JourneySampleRate float64 // --journey-tracing-sample-rate: per request, decided at arrival
	StepSampleRate    float64 // --step-tracing-sample-rate: each step independently (random() < rate)
	RichSubsampleRate float64 // --step-tracing-rich-subsample-rate: share of sampled steps that also carry REQUEST_SNAPSHOTs
	ClosureInterval   int64   // --step-tracing-closure-interval, 10..10000
	Model             string  // gen_ai.response.model; omitted when empty
	Route             string  // RouteCompletions or RouteChatCompletions (adds HANDOFF_TO_CORE and FIRST_RESPONSE_FROM_CORE)
	MaxEventsPerSpan  int     // the SDK's event limit; a span keeps its last MaxEventsPerSpan events
	SpansPerLine      int     // spans per ExportTraceServiceRequest line
	MonoBaseNs        int64   // monotonic clock at simulated time 0
	WallBaseNs        int64   // wall clock at simulated time 0 (Unix ns); never the real clock
	// InstanceID names the engine in a cluster, where several Writers write
	// into one trace: every span then carries the resource attribute
	// service.instance.id (OpenTelemetry's name for one instance of a
	// service) besides service.name, and step span ids are salted with it,
	// so that two engines' scheduler_steps_<seq> spans (each engine counts
	// steps and step spans from 1) never share ids. Request spans need no
	// salt: their ids come from request ids, unique across a cluster. Empty
	// (one engine): no such attribute, and the trace is what it was before
	// the option existed. KV events lines cannot carry it (see NewWriter).
	InstanceID string
	// RunID identifies the run among others whose traces may be ingested
	// together: every request id, trace id and span id is salted with a
	// hash of it, so that two runs with different RunIDs share no id (ids
	// that depend only on request numbers would make the second run's
	// spans duplicates of the first's). blis run derives it from the run's
	// whole configuration, so the same run gives the same trace. 0: no
	// salt, the ids are what they were before the option existed.
	RunID uint64
}

// DefaultOptions are vLLM's defaults (journey rate 1, step rate 0.01, rich
// rate 0.001, closure interval 100) on the completions route.
func DefaultOptions() Options {
	return Options{
		JourneySampleRate: 1,
		StepSampleRate:    0.01,
		RichSubsampleRate: 0.001,
		ClosureInterval:   DefaultClosureInterval,
		Route:             RouteCompletions,
		MaxEventsPerSpan:  DefaultMaxEventsPerSpan,
		SpansPerLine:      DefaultSpansPerLine,
		MonoBaseNs:        DefaultMonoBaseNs,
		WallBaseNs:        DefaultWallBaseNs,
	}
}

// OptionError is an Options value out of range; Field is the Options
// field's name (a CLI maps it to its own flag).
type OptionError struct {
	Field string
	Msg   string
}

func (e *OptionError) Error() string { return "trace option " + e.Field + ": " + e.Msg }

func optErr(field, format string, args ...any) error {
	return &OptionError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks the options; zero values that take a default are valid.
// Errors are *OptionError naming the field.
func (o Options) Validate() error {
	rates := []struct {
		field string
		v     float64
	}{
		{"JourneySampleRate", o.JourneySampleRate},
		{"StepSampleRate", o.StepSampleRate},
		{"RichSubsampleRate", o.RichSubsampleRate},
	}
	for _, r := range rates {
		if !(r.v >= 0 && r.v <= 1) { // also rejects NaN
			return optErr(r.field, "must be in [0, 1], got %v", r.v)
		}
	}
	switch {
	case o.ClosureInterval != 0 && (o.ClosureInterval < 10 || o.ClosureInterval > 10000):
		return optErr("ClosureInterval", "must be in [10, 10000] steps, got %d", o.ClosureInterval)
	case o.Route != "" && o.Route != RouteCompletions && o.Route != RouteChatCompletions:
		return optErr("Route", "must be %s or %s, got %q", RouteCompletions, RouteChatCompletions, clip.String(o.Route))
	case o.MaxEventsPerSpan < 0:
		return optErr("MaxEventsPerSpan", "must be > 0, got %d", o.MaxEventsPerSpan)
	case o.SpansPerLine < 0:
		return optErr("SpansPerLine", "must be > 0, got %d", o.SpansPerLine)
	case o.MonoBaseNs < 0:
		return optErr("MonoBaseNs", "must be >= 0 ns, got %d", o.MonoBaseNs)
	case o.WallBaseNs < 0:
		return optErr("WallBaseNs", "must be >= 0 ns, got %d", o.WallBaseNs)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.ClosureInterval == 0 {
		o.ClosureInterval = DefaultClosureInterval
	}
	if o.Route == "" {
		o.Route = RouteCompletions
	}
	if o.MaxEventsPerSpan == 0 {
		o.MaxEventsPerSpan = DefaultMaxEventsPerSpan
	}
	if o.SpansPerLine == 0 {
		o.SpansPerLine = DefaultSpansPerLine
	}
	if o.MonoBaseNs == 0 {
		o.MonoBaseNs = DefaultMonoBaseNs
	}
	if o.WallBaseNs == 0 {
		o.WallBaseNs = DefaultWallBaseNs
	}
	return o
}
