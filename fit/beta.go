package fit

import (
	"cmp"
	"math"
	"math/bits"
	"slices"

	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/internal/tracevocab"
	"github.com/blis-sim/blis/physics"
)

// Beta target sources.
const (
	SourcePairs   = "step_pairs" // ts_start of step id+1 minus ts_start of id, both sampled
	SourceJourney = "journey"    // first journey.SCHEDULED of step id+1 minus ts_start of id
)

// Regimes of the validation splits.
const (
	regime0 = 0 // beta: prefill-dominated (prefill tokens ≥ decode tokens); alpha: queued
	regime1 = 1 // beta: decode-dominated; alpha: unqueued (no waiting request, a free slot)
)

// samples are one vector's training data for one configuration, in time
// order within each trace.
type samples struct {
	y, w   []float64
	trace  []int32 // index of the trace in the configuration
	part   []uint8 // 0..folds-1: CV fold; folds: hold-out
	regime []uint8
	source []uint8 // beta: 0 step pairs, 1 journey
}

func (s *samples) len() int { return len(s.y) }

// keep compacts s to the rows i with keep(i), calling move(dst, src) so the
// caller can compact its own columns alongside.
func (s *samples) keep(keep func(i int) bool, move func(dst, src int)) {
	n := 0
	for i := range s.y {
		if !keep(i) {
			continue
		}
		s.y[n], s.w[n], s.trace[n], s.regime[n], s.source[n] = s.y[i], s.w[i], s.trace[i], s.regime[i], s.source[i]
		move(n, i)
		n++
	}
	s.y, s.w, s.trace, s.regime, s.source = s.y[:n], s.w[:n], s.trace[:n], s.regime[:n], s.source[:n]
}

// assignParts splits each trace's samples in time order: the last holdout
// share is the hold-out (part folds), the rest is cut into folds contiguous
// blocks (parts 0..folds-1). Fold k pools block k of every trace, so every
// fold has data of every trace and configuration, and the hold-out is the
// future of everything the fit sees.
func (s *samples) assignParts(folds int, holdout float64) {
	s.part = make([]uint8, len(s.y))
	start := 0
	for start < len(s.y) {
		end := start
		for end < len(s.y) && s.trace[end] == s.trace[start] {
			end++
		}
		n := end - start
		nHold := int(math.Ceil(holdout * float64(n)))
		if holdout > 0 && nHold >= n {
			nHold = n - 1
		}
		nTrain := n - nHold
		for j := range n {
			if j >= nTrain {
				s.part[start+j] = uint8(folds)
			} else {
				s.part[start+j] = uint8(j * folds / nTrain)
			}
		}
		start = end
	}
}

// betaSamples are the beta samples of one configuration. A sample points
// at its step row (ref) instead of copying it, and at the sums that do not
// come from the row (extra), so that 10M samples cost 8 bytes each beyond
// the table itself.
type betaSamples struct {
	samples
	cfg    *physics.PhysicsConfig
	spec   string // features.SpecV1 or SpecV2
	traces []*betaTrace
	ref    []int32 // index into the trace's steps
	extra  []int32 // index into extras, or -1
	extras []stepExtra
	g      int
}

// betaTrace is what the samples of one trace share.
type betaTrace struct {
	x    *stepIndex
	name string  // the engine, in messages
	cv2  float64 // prompt-length cv² for the non-rich prefill fallback
}

// stepExtra holds the inputs of a step that are not in its BATCH_SUMMARY.
type stepExtra struct {
	rich                bool // the next three are exact snapshot sums
	prefillWork         float64
	decodeCtx, decodeKV int64
	transfer, cpuRead   int64
}

// input rebuilds sample i's features.BetaInput (PreemptionEMA left 0).
func (b *betaSamples) input(i int) features.BetaInput {
	t := b.traces[b.trace[i]]
	s := &t.x.steps[b.ref[i]]
	in := features.BetaInput{
		PrefillTokens: s.PrefillTok, DecodeTokens: s.DecodeTok, ScheduledTokens: s.Scheduled,
		NumPrefillReqs: s.NumPrefill, NumDecodeReqs: s.NumDecode, RunningDepth: s.Running,
	}
	var ex stepExtra
	if e := b.extra[i]; e >= 0 {
		ex = b.extras[e]
	}
	in.TransferBlocks, in.CPUResidentReadBlocks = ex.transfer, ex.cpuRead
	if ex.rich {
		in.SumPrefillAttnWork, in.DecodeContextTokens, in.SumDecodeKVBlocks = ex.prefillWork, ex.decodeCtx, ex.decodeKV
		return in
	}
	if s.NumPrefill > 0 {
		// Σ p² over the step's prompts, from their sum and spread.
		in.SumPrefillAttnWork = float64(s.PrefillTok) * float64(s.PrefillTok) / float64(s.NumPrefill) * (1 + t.cv2)
	}
	share := float64(s.NumDecode) / float64(max(1, s.Running))
	in.DecodeContextTokens = int64(math.Round(s.KVUsage * float64(s.KVTotal) * float64(b.cfg.Knobs.BlockSizeTokens) * share))
	in.SumDecodeKVBlocks = int64(math.Round(float64(s.KVTotal-s.KVFree) * share))
	return in
}

func (b *betaSamples) features(i, g int, dst []float64) {
	in := b.input(i)
	t := b.traces[b.trace[i]]
	in.PreemptionEMA = t.x.ema[int(b.ref[i])*b.g+g]
	x := features.Beta(b.spec, b.cfg, in)
	copy(dst, x[:])
}

// featureSets computes the γ-independent features once: only the
// preemption feature differs between γ.
func (b *betaSamples) featureSets(i int, xs [][]float64) {
	in := b.input(i)
	t := b.traces[b.trace[i]]
	ema := t.x.ema[int(b.ref[i])*b.g:]
	in.PreemptionEMA = ema[0]
	f := features.Beta(b.spec, b.cfg, in)
	for g, x := range xs {
		if b.spec == features.SpecV1 {
			features.SetBetaPreemptionEMA(&f, ema[g])
		}
		copy(x, f[:])
	}
}

// stepIndex is a trace's steps sorted by id, with the preemption EMA of
// every γ after each step.
type stepIndex struct {
	steps []StepRow
	ema   []float64 // len(steps) × len(gammas)
	g     int
}

func newStepIndex(tr *Trace, gammas []float64, dropped *[]Count) *stepIndex {
	steps := tr.Steps
	if !slices.IsSortedFunc(steps, func(a, b StepRow) int { return cmp.Compare(a.ID, b.ID) }) {
		steps = slices.Clone(steps)
		slices.SortStableFunc(steps, func(a, b StepRow) int { return cmp.Compare(a.ID, b.ID) })
	}
	// Copied only when a row is left out (rare): the table can be large.
	kept := steps
	copied := false
	for i, s := range steps {
		bad := true
		switch {
		case i > 0 && s.ID == steps[i-1].ID:
			addCount(dropped, "duplicate step id (first kept)", 1)
		case s.Running < 0 || s.Waiting < 0 || s.NumPrefill < 0 || s.NumDecode < 0 || s.Scheduled < 0 ||
			s.PrefillTok < 0 || s.DecodeTok < 0 || s.NumPreempted < 0 || s.KVTotal <= 0 || s.KVFree < 0 ||
			!(s.KVUsage >= 0 && s.KVUsage <= 1):
			addCount(dropped, "step with a negative count or a KV usage outside [0,1]", 1)
		default:
			bad = false
		}
		switch {
		case bad && !copied:
			kept, copied = slices.Clone(steps[:i]), true
		case !bad && copied:
			kept = append(kept, s)
		}
	}
	x := &stepIndex{steps: kept, g: len(gammas), ema: make([]float64, len(kept)*len(gammas))}
	prev := make([]float64, len(gammas))
	for i, s := range kept {
		// As the simulator does: this step's preemptions over the requests
		// that remain running, folded in before the step's features.
		r := float64(s.NumPreempted) / float64(max(1, s.Running))
		for g, gamma := range gammas {
			prev[g] = gamma*r + (1-gamma)*prev[g]
			x.ema[i*len(gammas)+g] = prev[g]
		}
	}
	return x
}

// richStep sums a step's snapshots.
type richStep struct {
	n, scheduled        int64
	prefillWork         float64
	decodeCtx, decodeKV int64
}

// betaBuilder turns the traces of one configuration into beta samples.
type betaBuilder struct {
	cfg     *physics.PhysicsConfig
	opt     *Options
	out     *betaSamples
	skipped []Count
	rich    int64 // samples with exact snapshot sums
	// chunkedPrefillSteps counts prefill steps under chunked prefill, and
	// chunkedRich those of them with complete snapshots.
	chunkedPrefillSteps, chunkedRich int64
	noKV                             bool // offloading on and some trace had no KV events
}

func newBetaBuilder(cfg *physics.PhysicsConfig, opt *Options) *betaBuilder {
	return &betaBuilder{cfg: cfg, opt: opt, out: &betaSamples{cfg: cfg, spec: opt.Spec, g: len(opt.Gammas)}}
}

// promptCV2 is the squared coefficient of variation of prompt lengths, for
// the non-rich prefill-attention fallback: from the requests table, else the
// rich snapshots, else 0.
func promptCV2(tr *Trace) float64 {
	var xs []float64
	for _, r := range tr.Requests {
		if r.Prompt > 0 {
			xs = append(xs, float64(r.Prompt))
		}
	}
	if len(xs) < 2 {
		xs = xs[:0]
		seen := map[string]bool{}
		for _, s := range tr.Snapshots {
			if !seen[s.Request] && s.Prompt > 0 {
				seen[s.Request] = true
				xs = append(xs, float64(s.Prompt))
			}
		}
	}
	if len(xs) < 2 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return ss / float64(len(xs)) / (mean * mean)
}

// SkipLastStep is the skip reason of a trace's (engine's) last step when
// nothing after it gives its end: a step's time is the next step's start
// minus its own, and the trace records no end of a step (step.ts_end_ns and
// step.duration_us end before the model runs; docs/fit.md).
const SkipLastStep = "last step of the trace: no next step start to end it (a trace records no step end)"

// add builds the samples of one trace (index t in its configuration).
func (bb *betaBuilder) add(t int, tr *Trace, x *stepIndex) {
	rich := snapshotSums(tr)
	transfer, cpuRead := kvBlocksPerStep(tr)
	if bb.cfg.Knobs.CPUOffloading && !tr.HasKV {
		bb.noKV = true
	}
	useJourney := bb.useJourney(x)
	// The first journey.SCHEDULED of each step: its start, to within the
	// scheduler's own time.
	var firstSched map[int64]int64
	if useJourney {
		firstSched = firstScheduled(tr)
	}
	bb.out.grow(len(x.steps))
	bt := &betaTrace{x: x, name: tr.engineName()}
	if !bb.cfg.Knobs.ChunkedPrefillEnabled {
		bt.cv2 = promptCV2(tr)
	}
	bb.out.traces = append(bb.out.traces, bt)
	for i := range x.steps {
		s := &x.steps[i]
		next, src, reason := bb.cycleEnd(x, i, useJourney, firstSched)
		dt := float64(next-s.TsStartNs) / 1e9
		if reason == "" {
			reason = bb.excluded(s, dt)
		}
		var ex stepExtra
		if reason == "" {
			ex, reason = bb.extraOf(s, rich[s.ID], transfer[s.ID], cpuRead[s.ID])
		}
		if reason != "" {
			addCount(&bb.skipped, reason, 1)
			continue
		}
		bb.addSample(t, i, s, dt, src, ex)
	}
}

// snapshotSums sums each step's REQUEST_SNAPSHOTs by step id.
func snapshotSums(tr *Trace) map[int64]*richStep {
	rich := map[int64]*richStep{}
	for _, s := range tr.Snapshots {
		r := rich[s.StepID]
		if r == nil {
			r = &richStep{}
			rich[s.StepID] = r
		}
		r.n++
		r.scheduled += s.Scheduled
		if s.Scheduled == 0 {
			continue
		}
		if s.Prefill {
			r.prefillWork += float64(s.Computed+s.Scheduled) * float64(s.Scheduled)
		} else {
			r.decodeCtx += s.Computed + s.Scheduled
			// Allocated and cached blocks are disjoint (prefix_hit_ratio
			// divides one by their sum); the step reads both.
			r.decodeKV += s.BlocksAllocated + s.BlocksCached
		}
	}
	return rich
}

// kvBlocksPerStep sums, by scheduler step, the blocks of successful KV
// transfers (both directions) and of loads committed from CPU.
func kvBlocksPerStep(tr *Trace) (transfer, cpuRead map[int64]int64) {
	transfer, cpuRead = map[int64]int64{}, map[int64]int64{}
	for _, e := range tr.KV {
		switch {
		case e.Type == tracevocab.KVTransferCompleted && e.Success:
			transfer[e.Step] += e.Blocks
		case e.Type == tracevocab.KVCacheLoadCommitted && e.Medium == tracevocab.MediumCPU:
			cpuRead[e.Step] += e.Blocks
		}
	}
	return transfer, cpuRead
}

// useJourney says whether steps without a sampled successor take the
// journey source: always under SourceJourney, under "auto" when the trace
// has fewer than MinPairs adjacent sampled steps.
func (bb *betaBuilder) useJourney(x *stepIndex) bool {
	if bb.opt.BetaTarget != "auto" {
		return bb.opt.BetaTarget == SourceJourney
	}
	pairs := 0
	for i := 1; i < len(x.steps); i++ {
		if x.steps[i].ID == x.steps[i-1].ID+1 {
			pairs++
		}
	}
	return pairs < bb.opt.MinPairs
}

// firstScheduled maps each step id to the time of its first
// journey.SCHEDULED.
func firstScheduled(tr *Trace) map[int64]int64 {
	firstSched := map[int64]int64{}
	for _, s := range tr.Scheduled {
		if _, ok := firstSched[s.Step]; !ok {
			firstSched[s.Step] = s.TsNs
		}
	}
	return firstSched
}

// grow makes room for n more samples.
func (b *betaSamples) grow(n int) {
	b.y = slices.Grow(b.y, n)
	b.w = slices.Grow(b.w, n)
	b.trace = slices.Grow(b.trace, n)
	b.regime = slices.Grow(b.regime, n)
	b.source = slices.Grow(b.source, n)
	b.ref = slices.Grow(b.ref, n)
	b.extra = slices.Grow(b.extra, n)
}

// cycleEnd is the end of step i's cycle, the next step's start, and its
// source (0 step pairs, 1 journey): the next sampled step when it is id+1
// (except under SourceJourney), else with useJourney the first
// journey.SCHEDULED of id+1. Without either it returns the reason the step
// is skipped.
func (bb *betaBuilder) cycleEnd(x *stepIndex, i int, useJourney bool, firstSched map[int64]int64) (next int64, src uint8, skip string) {
	s := &x.steps[i]
	switch {
	case bb.opt.BetaTarget != SourceJourney && i+1 < len(x.steps) && x.steps[i+1].ID == s.ID+1:
		return x.steps[i+1].TsStartNs, 0, ""
	case useJourney:
		ts, ok := firstSched[s.ID+1]
		if !ok {
			return 0, 0, noNext(x, i, "no timestamp of the next step")
		}
		return ts, 1, ""
	default:
		return 0, 0, noNext(x, i, "next step not sampled")
	}
}

// noNext is the reason step i has no next start: the trace's last step has
// nothing after it (the trace holds no end time of a step, see
// SkipLastStep).
func noNext(x *stepIndex, i int, reason string) string {
	if i == len(x.steps)-1 {
		return SkipLastStep
	}
	return reason
}

// excluded is the reason a step whose cycle time dt is known is left out
// anyway (warm-up, engine idle after it, non-positive cycle), or "".
func (bb *betaBuilder) excluded(s *StepRow, dt float64) string {
	switch {
	case s.ID <= bb.opt.WarmupSteps:
		return "warm-up step"
	case s.Waiting == 0 && s.NumFinished >= s.Running:
		// The engine went idle after this step: the next one started
		// on an arrival, and the difference includes the idle time.
		return "engine idle after the step"
	case !(dt > 0):
		return "non-positive cycle time"
	}
	return ""
}

// extraOf gathers step s's inputs beyond its row: its KV transfer and CPU
// read blocks and, when its snapshots r are complete, their exact sums. It
// counts rich and chunked-prefill steps; under chunked prefill a prefill
// step without complete snapshots cannot be featurized, and the reason it
// is skipped is returned.
func (bb *betaBuilder) extraOf(s *StepRow, r *richStep, transfer, cpuRead int64) (stepExtra, string) {
	chunked := bb.cfg.Knobs.ChunkedPrefillEnabled
	ex := stepExtra{transfer: transfer, cpuRead: cpuRead}
	if s.Rich && r != nil && r.n == s.Running && r.scheduled == s.Scheduled {
		ex.rich, ex.prefillWork, ex.decodeCtx, ex.decodeKV = true, r.prefillWork, r.decodeCtx, r.decodeKV
		bb.rich++
		if s.NumPrefill > 0 && chunked {
			bb.chunkedPrefillSteps++
			bb.chunkedRich++
		}
	} else if s.NumPrefill > 0 && chunked {
		bb.chunkedPrefillSteps++
		return ex, "prefill step without complete snapshots (chunked prefill on)"
	}
	return ex, ""
}

// addSample appends step i of trace t as a sample: cycle time dt from
// source src, weight PreemptWeight when preemption-heavy, its regime, and
// its extra inputs when it has any.
func (bb *betaBuilder) addSample(t, i int, s *StepRow, dt float64, src uint8, ex stepExtra) {
	out := bb.out
	extra := int32(-1)
	if ex != (stepExtra{}) {
		extra = int32(len(out.extras))
		out.extras = append(out.extras, ex)
	}
	w := 1.0
	if float64(s.NumPreempted)/float64(max(1, s.Running)) > bb.opt.PreemptHeavy {
		w = bb.opt.PreemptWeight
	}
	regime := uint8(regime1)
	if s.PrefillTok >= s.DecodeTok {
		regime = regime0
	}
	out.y = append(out.y, dt)
	out.w = append(out.w, w)
	out.trace = append(out.trace, int32(t))
	out.regime = append(out.regime, regime)
	out.source = append(out.source, src)
	out.ref = append(out.ref, int32(i))
	out.extra = append(out.extra, extra)
}

// Outlier reasons (docs/fit.md, "Outliers").
const (
	// OutlierTooFast: the cycle is shorter than the step's physical lower
	// bound (features.LowerBoundSeconds): the step did not do the work its
	// counts name, so its counts or its time are wrong.
	OutlierTooFast = "outlier: cycle time below the hardware's lower bound for the step's work"
	// OutlierTooSlow: the cycle is above the outlier factor × the median of
	// the configuration's steps in the same token bucket.
	OutlierTooSlow = "outlier: cycle time above outlier factor × the median of steps with as many tokens"
)

// MinOutlierBucket is the least number of steps a token bucket needs for
// its median to judge them; the steps of a smaller bucket are not judged
// slow (they are never compared with other buckets' steps).
const MinOutlierBucket = 20

// RemovedStep is one step the outlier rule left out, with the value it was
// judged against.
type RemovedStep struct {
	Trace  string  `json:"trace"`
	StepID int64   `json:"step_id"`
	Tokens int64   `json:"scheduled_tokens"`
	Ms     float64 `json:"cycle_ms"`
	// LimitMs is the lower bound (too fast) or factor × the bucket's
	// median (too slow) that the cycle crossed.
	LimitMs float64 `json:"limit_ms"`
	Reason  string  `json:"reason"`
}

// OutlierSummary is what the outlier rule did to one configuration.
type OutlierSummary struct {
	// Unjudged counts the steps of token buckets with fewer than
	// MinOutlierBucket steps: they are kept whatever their time.
	Unjudged int64         `json:"steps_in_small_buckets_not_judged"`
	Removed  []RemovedStep `json:"removed"`
}

// tokenBucket is a step's outlier bucket: the bit length of its scheduled
// token count (1, 2-3, 4-7, ...).
func tokenBucket(scheduled int64) int { return bits.Len64(uint64(max(0, scheduled))) }

// dropOutliers applies the outlier rule when factor > 0 and returns the
// configuration's median cycle time (NaN without samples). The rule never
// removes a regime: a step is compared only with the steps of its own
// configuration and token bucket, a bucket with fewer than
// MinOutlierBucket steps is not judged slow, and a median rule removes
// less than half of a bucket. The one exception is physical: a step faster
// than features.LowerBoundSeconds is removed in any bucket. Every removed
// step is listed, and counted by reason in skipped.
func (bb *betaBuilder) dropOutliers(factor float64) (median float64, sum OutlierSummary) {
	out := bb.out
	sum.Removed = []RemovedStep{}
	if out.len() == 0 {
		return math.NaN(), sum
	}
	median = medianOf(out.y)
	if factor <= 0 {
		return median, sum
	}
	step := func(i int) *StepRow { return &out.traces[out.trace[i]].x.steps[out.ref[i]] }
	var byBucket [65][]float64
	for i, y := range out.y {
		b := tokenBucket(step(i).Scheduled)
		byBucket[b] = append(byBucket[b], y)
	}
	var limit [65]float64
	for b, ys := range byBucket {
		limit[b] = math.Inf(1)
		if len(ys) >= MinOutlierBucket {
			limit[b] = factor * medianOf(ys)
		} else {
			sum.Unjudged += int64(len(ys))
		}
	}
	out.keep(func(i int) bool {
		s, y := step(i), out.y[i]
		in := out.input(i)
		r := RemovedStep{Trace: out.traces[out.trace[i]].name, StepID: s.ID, Tokens: s.Scheduled, Ms: y * 1e3}
		if lb := features.LowerBoundSeconds(out.cfg, &in); y < lb {
			r.LimitMs, r.Reason = lb*1e3, OutlierTooFast
		} else if l := limit[tokenBucket(s.Scheduled)]; y > l {
			r.LimitMs, r.Reason = l*1e3, OutlierTooSlow
		} else {
			return true
		}
		addCount(&bb.skipped, r.Reason, 1)
		sum.Removed = append(sum.Removed, r)
		return false
	}, func(dst, src int) {
		out.ref[dst], out.extra[dst] = out.ref[src], out.extra[src]
	})
	out.ref, out.extra = out.ref[:out.len()], out.extra[:out.len()]
	return median, sum
}

// medianOf returns the median of xs (NaN when empty) without modifying it.
func medianOf(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	hi := selectKth(s, n/2)
	if n%2 == 1 {
		return hi
	}
	// The lower middle is the largest value left of n/2 after selection.
	return (slices.Max(s[:n/2]) + hi) / 2
}

// selectKth reorders s so that s[k] is the value a sort would put there,
// with no larger value before it and no smaller one after it, and returns
// s[k]. Quickselect with a median-of-three pivot, falling back to sorting a
// range that shrinks too slowly, so it is O(n) in practice and O(n log n)
// at worst.
func selectKth(s []float64, k int) float64 {
	lo, hi := 0, len(s)-1
	for budget := 2 * bits.Len(uint(len(s))); hi > lo; budget-- {
		if budget == 0 || hi-lo < 16 {
			slices.Sort(s[lo : hi+1])
			break
		}
		mid := lo + (hi-lo)/2
		if s[mid] < s[lo] {
			s[mid], s[lo] = s[lo], s[mid]
		}
		if s[hi] < s[lo] {
			s[hi], s[lo] = s[lo], s[hi]
		}
		if s[hi] < s[mid] {
			s[hi], s[mid] = s[mid], s[hi]
		}
		pivot := s[mid]
		// Hoare partition.
		i, j := lo, hi
		for i <= j {
			for s[i] < pivot {
				i++
			}
			for s[j] > pivot {
				j--
			}
			if i <= j {
				s[i], s[j] = s[j], s[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return s[k]
		}
	}
	return s[k]
}
