package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLockstepMisuseIsAnError: every way of driving a lockstep engine
// wrong returns an error naming what was wrong, and the plan survives a
// refused commit.
func TestLockstepMisuseIsAnError(t *testing.T) {
	cfg := baseConfig()
	alone, err := NewEngine(cfg)
	require.NoError(t, err)
	require.ErrorContains(t, alone.CommitStep(0, 10), "not in lockstep")
	_, planned := alone.PlannedStepUs()
	require.False(t, planned)
	require.Zero(t, alone.DummyStepUs())

	e, err := NewEngine(cfg)
	require.NoError(t, err)
	require.NoError(t, e.SetLockstep())
	require.True(t, e.InLockstep())
	require.Equal(t, int64(1000), e.DummyStepUs(), "the constant model's step")
	require.NoError(t, e.Inject(RequestSpec{ID: 1, PromptTokens: 100, OutputTokens: 2}, 0))
	require.ErrorContains(t, e.SetLockstep(), "after the engine received a request")
	for {
		at, ok := e.NextEventUs()
		require.True(t, ok, "the engine plans a step once the request is queued")
		require.NoError(t, e.Advance())
		if _, planned := e.PlannedStepUs(); planned {
			require.Equal(t, int64(100), at, "queued after the arrival overhead")
			break
		}
	}
	_, more := e.NextEventUs()
	require.False(t, more, "a planned step waits for its commit, nothing else is due")
	require.ErrorContains(t, e.CommitStep(100, 999), "the plan is a step of 1000 µs at 100 µs")
	require.ErrorContains(t, e.CommitStep(101, 1000), "the plan is a step of 1000 µs at 100 µs")
	require.ErrorContains(t, e.CommitStep(100, 0), "outside [1,")
	dt, planned := e.PlannedStepUs()
	require.True(t, planned)
	require.NoError(t, e.CommitStep(100, dt+500))
	at, ok := e.NextEventUs()
	require.True(t, ok)
	require.Equal(t, int64(1600), at, "the next step starts at the group's end")
	require.ErrorContains(t, e.CommitStep(1500, 100), "overlaps")
}
