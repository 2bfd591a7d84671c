package fit

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/physics"
)

// alphaSamples are the alpha samples of one configuration.
type alphaSamples struct {
	samples
	cfg *physics.PhysicsConfig
	in  []features.AlphaInput // PreemptionEMA left 0; see ema
	ema []float64
	g   int
	// lag is queued − ts_start of the reference step, seconds: how stale
	// the state the features see is.
	lag []float64
}

func (a *alphaSamples) features(i, g int, dst []float64) {
	in := a.in[i]
	in.PreemptionEMA = a.ema[i*a.g+g]
	x := features.AlphaFeatures(a.cfg, in)
	copy(dst, x[:])
}

func (a *alphaSamples) featureSets(i int, xs [][]float64) {
	for g, x := range xs {
		a.features(i, g, x)
	}
}

// referenceStep returns the index in byTs (step indices sorted by
// ts_start) of the latest step whose ts_start_ns is at or before queuedNs,
// or -1 when every sampled step starts after it. A step that starts in the
// same nanosecond as the QUEUED event counts as before it (docs/fit.md).
func referenceStep(ts []int64, queuedNs int64) int {
	// First index with ts > queuedNs, minus one.
	return sort.Search(len(ts), func(i int) bool { return ts[i] > queuedNs }) - 1
}

type alphaBuilder struct {
	cfg     *physics.PhysicsConfig
	opt     *Options
	out     *alphaSamples
	skipped []Count
}

func newAlphaBuilder(cfg *physics.PhysicsConfig, opt *Options) *alphaBuilder {
	return &alphaBuilder{cfg: cfg, opt: opt, out: &alphaSamples{cfg: cfg, g: len(opt.Gammas)}}
}

func (ab *alphaBuilder) add(t int, tr *Trace, x *stepIndex) {
	opt, c := ab.opt, ab.cfg
	skip := func(reason string) { addCount(&ab.skipped, reason, 1) }
	if len(tr.Requests) == 0 {
		return
	}
	order := make([]int, len(x.steps))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(x.steps[a].TsStartNs, x.steps[b].TsStartNs) })
	ts := make([]int64, len(order))
	for i, j := range order {
		ts[i] = x.steps[j].TsStartNs
	}
	// The prefix hit of a request, from its first snapshot.
	hit := map[string]float64{}
	if c.Knobs.PrefixCachingEnabled {
		first := map[string]int64{}
		for _, s := range tr.Snapshots {
			if f, ok := first[s.Request]; ok && f <= s.StepID {
				continue
			}
			first[s.Request] = s.StepID
			hit[s.Request] = float64(s.BlocksCached) / float64(max(1, s.BlocksAllocated+s.BlocksCached))
		}
	}
	type timed struct {
		q   int64
		in  features.AlphaInput
		y   float64
		w   float64
		rg  uint8
		si  int
		lag float64
	}
	var rows []timed
	for _, r := range tr.Requests {
		q, s := r.QueuedNs, r.FirstScheduledNs
		if q < 0 && !math.IsNaN(r.QueuedS) {
			q = int64(math.Round(r.QueuedS * 1e9))
		}
		if s < 0 && !math.IsNaN(r.FirstScheduledS) {
			s = int64(math.Round(r.FirstScheduledS * 1e9))
		}
		switch {
		case q < 0 || s < 0:
			skip("request without journey.QUEUED or journey.SCHEDULED")
			continue
		case r.Prompt <= 0:
			skip("request without prompt tokens")
			continue
		case s < q:
			skip("SCHEDULED before QUEUED")
			continue
		}
		ref := referenceStep(ts, q)
		if ref < 0 {
			skip("QUEUED before the first sampled step")
			continue
		}
		si := order[ref]
		st := x.steps[si]
		if st.ID <= opt.WarmupSteps {
			skip("reference step in the warm-up")
			continue
		}
		in := features.AlphaInput{
			RunningDepth: st.Running, WaitingDepth: st.Waiting, KVUsageRatio: st.KVUsage,
			PromptTokens: r.Prompt, PrefixHitRatio: hit[r.EngineID],
			KVFreeBytes: float64(st.KVFree) * c.BlockSizeBytes,
		}
		w := 1.0
		if float64(st.NumPreempted)/float64(max(1, st.Running)) > opt.PreemptHeavy {
			w = opt.PreemptWeight
		}
		rg := uint8(regime1)
		if st.Waiting > 0 || st.Running >= c.Knobs.MaxNumSeqs {
			rg = regime0
		}
		rows = append(rows, timed{q, in, float64(s-q) / 1e9, w, rg, si, float64(q-st.TsStartNs) / 1e9})
	}
	slices.SortStableFunc(rows, func(a, b timed) int { return cmp.Compare(a.q, b.q) })
	out := ab.out
	for _, r := range rows {
		out.y = append(out.y, r.y)
		out.w = append(out.w, r.w)
		out.trace = append(out.trace, int32(t))
		out.regime = append(out.regime, r.rg)
		out.source = append(out.source, 0)
		out.in = append(out.in, r.in)
		out.ema = append(out.ema, x.ema[r.si*x.g:(r.si+1)*x.g]...)
		out.lag = append(out.lag, r.lag)
	}
}
