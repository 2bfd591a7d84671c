package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParallelFallsBackWhenWaitingDominates: every fallbackWindows
// windows the caller's waits for the workers are looked at; past
// maxWaitSpins per window on average the workers stop (the run goes on
// with one goroutine), at or under it they go on, and the count restarts.
func TestParallelFallsBackWhenWaitingDominates(t *testing.T) {
	for _, tc := range []struct {
		spins int64
		pays  bool
	}{{0, true}, {fallbackWindows * maxWaitSpins, true}, {fallbackWindows*maxWaitSpins + 1, false}} {
		c := &Sim{windows: fallbackWindows - 2, waitSpins: tc.spins}
		require.True(t, c.parallelPays(), "not yet time to look")
		require.Equal(t, tc.pays, c.parallelPays(), "%d spins", tc.spins)
		require.Zero(t, c.waitSpins)
	}
}
