package sim

import "fmt"

// RequestSpec is one request offered to the simulator: what a workload
// generator or a replayed trace provides. Times are integer microseconds.
type RequestSpec struct {
	// ID is the request's index in arrival order, 0-based and dense.
	ID        int64
	ArrivalUs int64
	// PromptTokens and OutputTokens are the input length and the number of
	// tokens the request generates before it stops (> 0 each).
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
}

// SLOClass is a request's service class (seed 002): realtime,
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
	case r.PromptTokens <= 0:
		return fmt.Errorf("request %d: prompt_tokens %d must be > 0", r.ID, r.PromptTokens)
	case r.OutputTokens <= 0:
		return fmt.Errorf("request %d: output_tokens %d must be > 0", r.ID, r.OutputTokens)
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
	}
	return nil
}

// ValidateWorkload checks every spec and that IDs are 0..n-1 with
// non-decreasing arrival times.
func ValidateWorkload(reqs []RequestSpec) error {
	for i, r := range reqs {
		if r.ID != int64(i) {
			return fmt.Errorf("request at index %d has id %d; ids must be 0..n-1 in order", i, r.ID)
		}
		if err := r.Validate(); err != nil {
			return err
		}
		if i > 0 && r.ArrivalUs < reqs[i-1].ArrivalUs {
			return fmt.Errorf("request %d: arrival_us %d is before request %d's %d; sort by arrival", r.ID, r.ArrivalUs, i-1, reqs[i-1].ArrivalUs)
		}
	}
	return nil
}
