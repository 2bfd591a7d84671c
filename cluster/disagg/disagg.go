// Package disagg holds prefill/decode disaggregation's decision, apart
// from the loop that applies it (cluster/pd.go): once the router has
// chosen a request's decode instance, whether its prompt is computed on a
// prefill instance and its KV moved, or computed where it will decode.
// llm-d decides after picking the decode pod, from what that pod already
// caches (its prefix-based-pd-decider); so do these.
package disagg

import "fmt"

// Decider decides a request's split.
type Decider interface {
	Name() string
	// Disaggregate says whether a request of prompt tokens, nonCached of
	// which its decode instance does not hold in its prefix cache, is
	// prefilled elsewhere.
	Disaggregate(prompt, nonCached int64) bool
}

// Names of the built-in deciders.
const (
	NeverName           = "never"
	AlwaysName          = "always"
	PrefixThresholdName = "prefix-threshold"
)

// Never serves every request where it decodes: no disaggregation.
type Never struct{}

func (Never) Name() string                 { return NeverName }
func (Never) Disaggregate(_, _ int64) bool { return false }

// Always prefills every request elsewhere.
type Always struct{}

func (Always) Name() string                 { return AlwaysName }
func (Always) Disaggregate(_, _ int64) bool { return true }

// DefaultPrefixThreshold is llm-d's prefix-based-pd-decider's default:
// disaggregate when more than 16 prompt tokens are not cached on the
// decode pod (llm-d-inference-scheduler, docs/disaggregation.md).
const DefaultPrefixThreshold = 16

// PrefixThreshold disaggregates a request when more than Tokens of its
// prompt are not in its decode instance's prefix cache: a prompt mostly
// cached there is cheaper to finish locally than to move.
type PrefixThreshold struct{ Tokens int64 }

func (PrefixThreshold) Name() string { return PrefixThresholdName }
func (p PrefixThreshold) Disaggregate(_, nonCached int64) bool {
	return nonCached > p.Tokens
}

// New is the decider called name; threshold is prefix-threshold's. An
// unknown name is an error that lists the deciders.
//
// New panics if threshold < 0. This is a precondition: the template's
// threshold is range-checked, once, where a file, a flag or --set gives
// it (its declaration in Templates), and the error names the key.
func New(name string, threshold int64) (Decider, error) {
	switch name {
	case NeverName:
		return Never{}, nil
	case AlwaysName:
		return Always{}, nil
	case PrefixThresholdName:
		if threshold < 0 {
			panic(fmt.Sprintf("disagg: prefix-threshold's threshold %d is not >= 0 tokens", threshold))
		}
		return PrefixThreshold{Tokens: threshold}, nil
	}
	return nil, fmt.Errorf("disaggregation decider %q is not one of never, always, prefix-threshold", name)
}
