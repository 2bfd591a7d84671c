package route

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// TestLiveViewDecidesAsTheWholeView: a View whose Live lists only some
// instances (the others not routable: terminated for good) gets the
// decisions and the scores (of the live instances) the whole View gets,
// from every policy and scorer, over random fleets where instances come
// and go. Two copies of each policy see the same requests, one the View
// with Live, one without; their state (round-robin's counter, the prefix
// index) must stay in step.
func TestLiveViewDecidesAsTheWholeView(t *testing.T) {
	seed := uint64(7)
	rnd := func(k int) int {
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % k
	}
	type build func(n int) Policy
	builds := map[string]build{}
	for _, name := range Names {
		builds[name] = func(n int) Policy {
			p, err := New(name, n, Params{RefreshUs: 1000, MinMatchShare: 0.2})
			require.NoError(t, err)
			return p
		}
	}
	for _, s := range ScorerNames {
		builds["weighted:"+s] = func(n int) Policy {
			return NewWeighted([]WeightedScorer{{Name: s, Weight: 1}, {Name: QueueDepth, Weight: 0.5}}, n, 40)
		}
	}
	builds["weighted:precise"] = func(n int) Policy {
		p, err := New(WeightedName, n, Params{PrefixMode: PrefixPrecise})
		require.NoError(t, err)
		return p
	}
	for name, mk := range builds {
		for _, n0 := range []int{1, 3, 70} {
			t.Run(fmt.Sprintf("%s/%d", name, n0), func(t *testing.T) {
				whole, live := mk(n0), mk(n0)
				var vw, vl View
				n := n0
				vw.Resize(n)
				vw.Routable = make([]bool, n)
				alive := make([]bool, n)
				for i := range alive {
					alive[i], vw.Routable[i] = true, true
				}
				sw, sl := make([]float64, 0), make([]float64, 0)
				for step := 0; step < 3000; step++ {
					switch r := rnd(20); {
					case r == 0 && n < 200: // an instance starts (not routable yet)
						n++
						vw.Resize(n)
						vw.Routable = append(vw.Routable[:n-1], false)
						alive = append(alive, true)
					case r == 1: // one ends for good
						if i := rnd(n); alive[i] {
							alive[i], vw.Routable[i] = false, false
							for _, p := range []Policy{whole, live} {
								if f, ok := p.(Forgetter); ok {
									f.Forget(i)
								}
							}
						}
					case r == 2: // one starts or stops taking requests
						if i := rnd(n); alive[i] {
							vw.Routable[i] = !vw.Routable[i]
						}
					}
					any := false
					for i := range n {
						if alive[i] {
							vw.QueueDepth[i], vw.BatchSize[i], vw.InFlight[i] = int64(rnd(4)), int64(rnd(6)), int64(rnd(5))
							vw.KVUtilization[i] = float64(rnd(5)) / 4
						} else { // what a gone instance last showed: anything
							vw.QueueDepth[i], vw.KVUtilization[i] = int64(rnd(9)), float64(rnd(3))
						}
						any = any || vw.Routable[i]
					}
					if !any {
						continue
					}
					vw.NowUs = int64(step) * 300
					vl = vw
					vl.Live = nil
					for i := range n {
						if alive[i] {
							vl.Live = append(vl.Live, int32(i))
						}
					}
					hs := make([]uint64, 1+rnd(5))
					for j := range hs {
						hs[j] = uint64(1+rnd(3))<<40 | uint64(j+1)
					}
					req := &Request{Spec: &sim.RequestSpec{ID: int64(step), PromptTokens: 16 * int64(len(hs)+1), OutputTokens: 1}, Hashes: hs, Blocks: len(hs) + 1}
					if pi, ok := whole.(PreciseIndexer); ok && pi.PreciseIndex() != nil {
						i := rnd(n)
						for _, p := range []Policy{whole, live} {
							p.(PreciseIndexer).PreciseIndex().Apply(i, sim.KVBlockEvent{Hash: hs[0], Tier: sim.TierGPU})
						}
					}
					sw, sl = append(sw[:0], make([]float64, n)...), append(sl[:0], make([]float64, n)...)
					whole.Score(req, &vw, sw)
					live.Score(req, &vl, sl)
					for _, i := range vl.Live {
						require.Equal(t, sw[i], sl[i], "step %d: score of instance %d", step, i)
					}
					a, b := whole.Route(req, &vw), live.Route(req, &vl)
					require.Equal(t, a, b, "step %d", step)
					require.True(t, vl.OK(b), "step %d: chose %d, not routable", step, b)
					whole.Routed(req, a)
					live.Routed(req, b)
				}
			})
		}
	}
}
