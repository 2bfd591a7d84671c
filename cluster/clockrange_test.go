package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// CL-4 covers the clock's range as well as its order: an event past
// sim.MaxTimeUs (a conversion that wrapped or saturated upstream) stops
// the run with the invariant, instead of running 9.2e18 µs of simulated
// time into every rate.
func TestClockPastItsRangeIsAnInvariantFailure(t *testing.T) {
	reqs := []sim.RequestSpec{{ID: 0, ArrivalUs: 0, PromptTokens: 64, OutputTokens: 2}, {ID: 1, ArrivalUs: sim.MaxTimeUs + 1, PromptTokens: 64, OutputTokens: 2}}
	c, err := New(Config{Instances: []Instance{{ID: "a", Config: scaleEngine()}}}, NewSliceSource(reqs))
	require.NoError(t, err)
	_, err = c.Run()
	var inv *sim.InvariantError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "CL-4", inv.Invariant)
	require.Contains(t, err.Error(), "would pass its range")
}
