package sim

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKillAndRedirect: what an instance being drained does with its
// requests. Kill ends one as Abort does, reported Killed and counted
// apart; Redirect takes out a request that has not started, with its
// spec and no completion, and refuses one that has; Held lists what is
// left, by id.
func TestKillAndRedirect(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.MaxNumSeqs = 1
	g := newAbortRig(t, cfg)
	g.inject(RequestSpec{ID: 0, PromptTokens: 100, OutputTokens: 3}, 0)
	g.inject(RequestSpec{ID: 1, PromptTokens: 40, OutputTokens: 2, Tenant: 3}, 0)
	g.inject(RequestSpec{ID: 2, PromptTokens: 40, OutputTokens: 2}, 10_000)
	g.until(500)
	require.Equal(t, []int64{0, 1, 2}, g.e.Held(nil))

	_, ok, err := g.e.Redirect(0, 500)
	require.NoError(t, err)
	require.False(t, ok, "request 0 is running: it finishes here")
	spec, ok, err := g.e.Redirect(1, 500)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, RequestSpec{ID: 1, PromptTokens: 40, OutputTokens: 2, Tenant: 3}, spec)
	require.Empty(t, g.e.Completions(), "a redirected request does not leave: it goes elsewhere")
	spec, ok, err = g.e.Redirect(2, 500)
	require.NoError(t, err)
	require.True(t, ok, "not yet arrived")
	require.Equal(t, int64(2), spec.ID)
	require.Equal(t, []int64{0}, g.e.Held(nil))

	require.True(t, g.kill(0, 600))
	res := g.finish()
	c := g.completion(0)
	require.True(t, c.Killed)
	require.False(t, c.TimedOut)
	require.Equal(t, Counts{Offered: 3, Injected: 3, Killed: 1, Redirected: 2}, res.Requests)
	require.Empty(t, g.e.Held(nil))

	_, err = g.e.Kill(9, 10)
	require.Error(t, err, "before the engine's clock")
	_, _, err = g.e.Redirect(9, 10)
	require.Error(t, err)
}

func (g *abortRig) kill(id, at int64) bool {
	g.t.Helper()
	ok, err := g.e.Kill(id, at)
	require.NoError(g.t, err)
	g.done = append(g.done, g.e.Completions()...)
	return ok
}

// TestRetire: an engine with requests left refuses to retire; an idle one
// retires, keeps its result (Finish gives the same), reports an empty
// cache and refuses new requests.
func TestRetire(t *testing.T) {
	g := newAbortRig(t, baseConfig())
	g.inject(RequestSpec{ID: 0, PromptTokens: 100, OutputTokens: 3}, 0)
	require.Error(t, g.e.Retire(), "a request is left")
	require.False(t, g.e.Retired())
	g.until(math.MaxInt64)
	before, err := g.e.Finish()
	require.NoError(t, err)
	require.NoError(t, g.e.Retire())
	require.NoError(t, g.e.Retire(), "twice: nothing more")
	require.True(t, g.e.Retired())
	after, err := g.e.Finish()
	require.NoError(t, err)
	require.Equal(t, before, after)
	st := g.e.Status()
	require.Zero(t, st.KVUtilization)
	require.Equal(t, st.TotalKVBlocks, st.FreeKVBlocks)
	require.Zero(t, st.InFlight)
	require.ErrorContains(t, g.e.Inject(RequestSpec{ID: 1, PromptTokens: 10, OutputTokens: 1}, g.e.Now()), "retired")
	require.Nil(t, g.e.kv.index, "the prefix index is gone")
}
