package sim

import "fmt"

// MaxTokens is the most prompt or output tokens one request may have. It
// is far above any model's context (the longest, 10M tokens, is 2^23.3),
// so that no real request is refused, and low enough that no length
// arithmetic overflows: prompt + output, block counts and their products
// with per-token costs stay far inside int64, and token counts convert to
// float64 exactly (< 2^53). The workload generators draw within it
// (workload's maxTokens is this) and the trace readers refuse a row above
// it naming its file and line. A model's own context is the engine's
// EngineConfig.MaxModelLen.
const MaxTokens = 1 << 50

// RequestSpec is one request offered to the simulator: what a workload
// generator or a replayed trace provides. Times are integer microseconds.
type RequestSpec struct {
	// ID identifies the request; the caller chooses it, unique among an
	// engine's requests (its own KV content is identified by it). Workloads
	// number requests 0, 1, ... in arrival order.
	ID        int64
	ArrivalUs int64
	// PromptTokens and OutputTokens are the input length and the number of
	// tokens the request generates before it stops (each in [1, MaxTokens]).
	PromptTokens int64
	OutputTokens int64
	// PrefixGroup > 0 marks requests whose first PrefixTokens prompt tokens
	// are identical across the group (a shared system prompt); 0 means none.
	PrefixGroup  int32
	PrefixTokens int64
	// Priority is a static class used by the priority policies' base score
	// (higher is more important); 0 by default.
	Priority int32
	// Tenant is the request's tenant, an index into the workload's tenant
	// list (0: the default tenant); SLOClass its service class (SLONone
	// when the workload gives none). The cluster reports latencies per
	// class and fairness across tenants; the engine ignores both.
	Tenant   int32
	SLOClass SLOClass
	// Session > 0 names a token stream that several requests continue in
	// turn (the turns of a chat session, the calls of an agent): the
	// request's stream, prompt then output, is the session's stream from
	// its start, so turn k+1, whose prompt holds turn k's prompt and output,
	// finds their blocks cached. A session's requests must not overlap in
	// time (each is sent after the previous one finished).
	Session int64
	// Content, when not empty, names the prompt's leading tokens in chunks
	// of ContentTokens: requests whose lists start with the same k ids share
	// their first k·ContentTokens prompt tokens (a Mooncake trace's
	// hash_ids, 512 tokens each). Only chunks wholly inside the prompt count.
	Content       []uint64
	ContentTokens int64
	// TimeoutUs > 0: the client gives up this long after ArrivalUs and
	// the request is aborted if it has not finished (a cluster run
	// enforces it; the engine ignores it).
	TimeoutUs int64
	// Handoff is the request's part in a disaggregated request (sim/pd.go):
	// HandoffNone for a request served whole.
	Handoff Handoff
}

// Outcome is how a request left: completed (its last token delivered),
// rejected by admission, dropped as unservable at its instance, timed out
// (its client gave up and the request was aborted), or rejected by its
// instance as longer than the model's context (max_model_len).
type Outcome uint8

const (
	Completed Outcome = iota
	Rejected
	Dropped
	TimedOut
	TooLong
	// Killed: its instance was scaled down without waiting for it.
	Killed
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"completed", "rejected", "dropped", "timed_out", "rejected_too_long", "killed"}

func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", o)
}

// SLOClass is a request's service class (docs/workloads.md): realtime,
// interactive or batch.
type SLOClass uint8

const (
	SLONone SLOClass = iota
	SLORealtime
	SLOInteractive
	SLOBatch
	numSLOClasses
)

var sloNames = [numSLOClasses]string{"", "realtime", "interactive", "batch"}

// String is the class's name ("" for SLONone).
func (c SLOClass) String() string {
	if c < numSLOClasses {
		return sloNames[c]
	}
	return fmt.Sprintf("slo-class(%d)", c)
}

// ParseSLOClass reads a class name; "" is SLONone.
func ParseSLOClass(s string) (SLOClass, error) {
	for i, n := range sloNames {
		if n == s {
			return SLOClass(i), nil
		}
	}
	return 0, fmt.Errorf("slo_class %q is not a class; use realtime, interactive or batch", s)
}

// Validate checks one spec; the error names the request and the field.
func (r RequestSpec) Validate() error {
	switch {
	case r.ArrivalUs < 0:
		return fmt.Errorf("request %d: arrival_us %d is negative", r.ID, r.ArrivalUs)
	case r.ArrivalUs > MaxTimeUs:
		return fmt.Errorf("request %d: arrival_us %d is beyond the simulator's %d µs (2^61, about 73,000 years)", r.ID, r.ArrivalUs, MaxTimeUs)
	case r.PromptTokens <= 0:
		return fmt.Errorf("request %d: prompt_tokens %d must be > 0", r.ID, r.PromptTokens)
	case r.PromptTokens > MaxTokens:
		return fmt.Errorf("request %d: prompt_tokens %d is more than the simulator takes (%d)", r.ID, r.PromptTokens, int64(MaxTokens))
	case r.OutputTokens <= 0:
		return fmt.Errorf("request %d: output_tokens %d must be > 0", r.ID, r.OutputTokens)
	case r.OutputTokens > MaxTokens:
		return fmt.Errorf("request %d: output_tokens %d is more than the simulator takes (%d)", r.ID, r.OutputTokens, int64(MaxTokens))
	case r.PrefixGroup < 0:
		return fmt.Errorf("request %d: prefix_group %d is negative", r.ID, r.PrefixGroup)
	case r.PrefixTokens < 0 || r.PrefixTokens > r.PromptTokens:
		return fmt.Errorf("request %d: prefix_tokens %d must be within [0, prompt_tokens %d]", r.ID, r.PrefixTokens, r.PromptTokens)
	case r.PrefixGroup == 0 && r.PrefixTokens != 0:
		return fmt.Errorf("request %d: prefix_tokens %d without a prefix_group", r.ID, r.PrefixTokens)
	case r.Tenant < 0:
		return fmt.Errorf("request %d: tenant %d is negative", r.ID, r.Tenant)
	case r.SLOClass >= numSLOClasses:
		return fmt.Errorf("request %d: slo_class %d is not a class", r.ID, r.SLOClass)
	case r.TimeoutUs < 0 || r.TimeoutUs > MaxTimeUs:
		return fmt.Errorf("request %d: timeout_us %d must be within [0, %d] µs", r.ID, r.TimeoutUs, MaxTimeUs)
	case r.Session < 0:
		return fmt.Errorf("request %d: session %d is negative", r.ID, r.Session)
	case r.Handoff > HandoffDecode:
		return fmt.Errorf("request %d: handoff %d is not a part", r.ID, r.Handoff)
	case r.Handoff == HandoffPrefill && r.OutputTokens != 1:
		return fmt.Errorf("request %d: a prefill handoff produces 1 token, got output_tokens %d", r.ID, r.OutputTokens)
	case len(r.Content) > 0 && r.ContentTokens <= 0:
		return fmt.Errorf("request %d: content_tokens %d must be > 0 with %d content ids", r.ID, r.ContentTokens, len(r.Content))
	case len(r.Content) == 0 && r.ContentTokens != 0:
		return fmt.Errorf("request %d: content_tokens %d without content ids", r.ID, r.ContentTokens)
	}
	return nil
}

// ValidateWorkload checks every spec and that ids strictly increase and
// arrival times do not decrease along the slice (so ids are unique: the
// engine identifies a request's own KV content by its id).
func ValidateWorkload(reqs []RequestSpec) error {
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			return err
		}
		if i == 0 {
			continue
		}
		if p := reqs[i-1]; r.ID <= p.ID {
			return fmt.Errorf("request at index %d has id %d, not above the previous request's %d; ids must increase in arrival order", i, r.ID, p.ID)
		}
		if r.ArrivalUs < reqs[i-1].ArrivalUs {
			return fmt.Errorf("request %d: arrival_us %d is before request %d's %d; sort by arrival", r.ID, r.ArrivalUs, reqs[i-1].ID, reqs[i-1].ArrivalUs)
		}
	}
	return nil
}
