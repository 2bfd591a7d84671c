package route

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// vLLM's balancer: the lowest 4 × waiting + running, ties to the lowest
// index, its own sends added to waiting until the next publication.
func TestVLLMDP(t *testing.T) {
	req := &Request{Spec: &sim.RequestSpec{ID: 1, PromptTokens: 10, OutputTokens: 1}}
	route := func(p Policy, v *View) int {
		i := p.Route(req, v)
		p.Routed(req, i)
		return i
	}
	// Scores: engine 0 has 1 waiting, 2 running: 6; engine 1 has 0 and 5: 5.
	v := view([4]float64{1, 2, 0, 0}, [4]float64{0, 5, 0, 0})
	p, err := New(VLLMDPName, 2, Params{})
	require.NoError(t, err)
	dp := p.(*VLLMDP)
	dp.RefreshUs = 100_000
	v.NowUs = 10
	require.Equal(t, 1, route(p, v)) // 6 vs 5
	require.Equal(t, 0, route(p, v)) // 6 vs 9: the send counted as waiting
	require.Equal(t, 1, route(p, v)) // 10 vs 9
	scores := make([]float64, 2)
	p.Score(req, v, scores)
	require.Equal(t, []float64{-10, -13}, scores)
	// A new publication (the next 100 ms) replaces the local additions.
	v.NowUs = 100_000
	p.Score(req, v, scores)
	require.Equal(t, []float64{-6, -5}, scores)
	require.Equal(t, 1, route(p, v))

	// Fresh counts at every decision: no local additions accumulate; a tie
	// goes to the lowest index.
	fresh := NewVLLMDP(3, 0)
	w := view([4]float64{0, 4, 0, 0}, [4]float64{1, 0, 0, 0}, [4]float64{0, 4, 0, 0})
	require.Equal(t, 0, route(fresh, w))
	require.Equal(t, 0, route(fresh, w))
	require.Equal(t, VLLMDPName, fresh.Name())
	require.False(t, fresh.NeedsHashes())
}
