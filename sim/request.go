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
