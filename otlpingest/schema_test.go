package otlpingest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type issueRec struct {
	kind   IssueKind
	detail string
}

func collectIssues() (*[]issueRec, func(IssueKind, string)) {
	var got []issueRec
	return &got, func(k IssueKind, d string) { got = append(got, issueRec{k, d}) }
}

func TestCheckAttrs(t *testing.T) {
	full := []KeyValue{
		{Key: "step.id", Value: Value{Type: ValInt, Int: 7}},
		{Key: "request.id", Value: Value{Type: ValString, Str: "r1"}},
		{Key: "request.phase", Value: Value{Type: ValString, Str: "DECODE"}},
		{Key: "request.num_prompt_tokens", Value: Value{Type: ValInt, Int: 100}},
		{Key: "request.num_computed_tokens", Value: Value{Type: ValInt, Int: 120}},
		{Key: "request.num_output_tokens", Value: Value{Type: ValInt, Int: 20}},
		{Key: "request.num_preemptions", Value: Value{Type: ValInt, Int: 0}},
		{Key: "request.scheduled_tokens_this_step", Value: Value{Type: ValInt, Int: 1}},
		{Key: "kv.blocks_allocated_gpu", Value: Value{Type: ValInt, Int: 8}},
		{Key: "kv.blocks_cached_gpu", Value: Value{Type: ValInt, Int: 2}},
	}
	issues, add := collectIssues()
	a, ok := checkAttrs(RequestSnapshotAttrs, full, "line 2", "snap", add)
	require.True(t, ok)
	assert.Empty(t, *issues, "the optional effective_prompt_len may be absent")
	v, has := a.Int("request.num_computed_tokens")
	assert.True(t, has)
	assert.Equal(t, int64(120), v)
	s, _ := a.Str("request.phase")
	assert.Equal(t, "DECODE", s)
	_, has = a.Int("request.effective_prompt_len")
	assert.False(t, has)

	// Wrong type, unknown key, missing required, missing key attribute.
	bad := append([]KeyValue{}, full[2:]...) // no step.id, no request.id
	bad[1] = KeyValue{Key: "request.num_prompt_tokens", Value: Value{Type: ValString, Str: "100"}}
	bad = append(bad, KeyValue{Key: "request.color", Value: Value{Type: ValString, Str: "red"}})
	issues, add = collectIssues()
	a, ok = checkAttrs(RequestSnapshotAttrs, bad, "line 3", "snap", add)
	assert.False(t, ok, "a missing key attribute skips the row")
	_, has = a.Int("request.num_prompt_tokens")
	assert.False(t, has, "a value of the wrong type is not used")
	assert.Equal(t, []issueRec{
		{IssueWrongType, `line 3 snap: attribute "request.num_prompt_tokens" is string, want int`},
		{IssueUnknownAttribute, `line 3 snap: attribute "request.color"`},
		{IssueMissingAttribute, "line 3 snap: missing request.num_prompt_tokens"},
		{IssueMissingKey, "line 3 snap: missing step.id, request.id; row skipped"},
	}, *issues)
}

func TestSchemaTables(t *testing.T) {
	// Every event can be placed (it has a locating attribute), no key is
	// listed twice, and the journey events share their common attributes.
	for _, list := range [][]EventSpec{APIEvents, JourneyEvents, StepEvents} {
		for _, e := range list {
			seen := map[string]bool{}
			locating := 0
			for _, a := range e.Attrs {
				assert.False(t, seen[a.Key], "%s lists %s twice", e.Name, a.Key)
				seen[a.Key] = true
				if a.Locates {
					locating++
					assert.True(t, a.Required, "%s: a locating attribute is required", a.Key)
				}
			}
			assert.Positive(t, locating, "%s has no locating attribute", e.Name)
		}
	}
	assert.Len(t, BatchSummaryAttrs, 16, "15 ints and kv.usage_gpu_ratio, as the schema lists")
	assert.Len(t, JourneyEvents, 5)
	assert.Len(t, eventSpec(JourneyEvents, "journey.SCHEDULED").Attrs, 11)
	assert.Nil(t, eventSpec(JourneyEvents, "journey.UNKNOWN"))
	keys := SchemaKeys()
	assert.Contains(t, keys, "kv.usage_gpu_ratio")
	assert.Contains(t, keys, "prefill.done_tokens")
	assert.IsIncreasing(t, keys)
}
