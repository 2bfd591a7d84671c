package fit

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

func TestReferenceStepJoin(t *testing.T) {
	ts := []int64{100, 200, 300}
	for _, tc := range []struct {
		queued int64
		want   int
	}{
		{99, -1}, // before every sampled step
		{100, 0}, // a step starting in the same ns counts as before
		{101, 0},
		{199, 0}, // not the step after
		{200, 1},
		{300, 2},
		{1 << 40, 2},
	} {
		require.Equal(t, tc.want, referenceStep(ts, tc.queued), "queued at %d", tc.queued)
	}
	require.Equal(t, -1, referenceStep(nil, 5))
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.Lambdas = nil }, "lambdas"},
		{func(o *Options) { o.Lambdas = []float64{-1} }, "lambdas"},
		{func(o *Options) { o.Lambdas = []float64{math.NaN()} }, "lambdas"},
		{func(o *Options) { o.Gammas = []float64{0} }, "gammas"},
		{func(o *Options) { o.Gammas = []float64{1.5} }, "gammas"},
		{func(o *Options) { o.Folds = 1 }, "folds"},
		{func(o *Options) { o.Holdout = 1 }, "holdout"},
		{func(o *Options) { o.WarmupSteps = -1 }, "warmup-steps"},
		{func(o *Options) { o.OutlierFactor = 0.5 }, "outlier-factor"},
		{func(o *Options) { o.MinPairs = -1 }, "min-pairs: -1 is negative"},
		{func(o *Options) { o.PreemptWeight = 2 }, "preempt-weight"},
		{func(o *Options) { o.BetaTarget = "duration_us" }, "beta-target"},
	} {
		o := DefaultOptions()
		tc.mod(&o)
		err := o.Validate()
		require.Error(t, err)
		require.Contains(t, err.Error(), tc.want)
	}
	o := DefaultOptions()
	require.NoError(t, o.Validate())
}

func TestAssignPartsIsTemporalPerTrace(t *testing.T) {
	s := samples{y: make([]float64, 30), trace: make([]int32, 30)}
	for i := 20; i < 30; i++ {
		s.trace[i] = 1
	}
	s.assignParts(5, 0.2)
	// Trace 0: 20 samples, last 4 held out, 16 in 5 contiguous folds.
	require.Equal(t, []uint8{0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 5}, s.part[:20])
	// Trace 1: 10 samples, last 2 held out; every fold gets some.
	require.Equal(t, []uint8{0, 0, 1, 1, 2, 3, 3, 4, 5, 5}, s.part[20:])
}

func TestFitLineKeepsCoefficientsNonNegative(t *testing.T) {
	for _, tc := range []struct {
		name      string
		xs, ys    []float64
		base, per float64
		method    string
	}{
		{"exact", []float64{0, 10, 20}, []float64{5, 7, 9}, 5, 0.2, "ols"},
		{"negative slope", []float64{0, 10, 20}, []float64{9, 7, 5}, 7, 0, "ols, slope clamped to 0"},
		{"negative base", []float64{10, 20, 30}, []float64{0, 10, 20}, 0, 2.0 / 3 * 1.0, "ols, base clamped to 0"},
		{"empty", nil, nil, 0, 0, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fitLine(tc.xs, tc.ys)
			require.Equal(t, tc.method, f.Method)
			require.InDelta(t, tc.base, f.BaseUs, 1e-9)
			if tc.name != "negative base" {
				require.InDelta(t, tc.per, f.PerUnit, 1e-9)
			} else {
				// Through the origin: Σxy/Σx² = (0+200+600)/1400.
				require.InDelta(t, 800.0/1400, f.PerUnit, 1e-12)
			}
		})
	}
}

// roofTrace simulates the noisy roofline truth and loads its tables.
func roofTrace(t *testing.T, mod func(*simRun)) (*physics.PhysicsConfig, *Trace) {
	t.Helper()
	dir := t.TempDir()
	r := defaultSimRun()
	r.noise = 0.05
	if mod != nil {
		mod(&r)
	}
	c := simulate(t, dir, r)
	tr, err := LoadTrace(filepath.Join(dir, "tables"))
	require.NoError(t, err)
	return c, tr
}

func TestRunIsDeterministic(t *testing.T) {
	c, tr := roofTrace(t, nil)
	var outs [2][]byte
	for i := range outs {
		res, err := Run([]Config{{Name: "a", Phys: c, Traces: []*Trace{tr}}}, DefaultOptions(), "test")
		require.NoError(t, err)
		y, err := res.File.Marshal()
		require.NoError(t, err)
		js, err := json.Marshal(res.Report)
		require.NoError(t, err)
		var md bytes.Buffer
		require.NoError(t, res.Report.WriteMarkdown(&md, nil))
		outs[i] = append(append(y, js...), md.Bytes()...)
	}
	require.Equal(t, outs[0], outs[1])
}

func TestAlphaCorrectionChangesNoPrediction(t *testing.T) {
	// Synchronous scheduling: with async scheduling a request queued at a
	// step boundary is still waiting in that step, so few requests find
	// no queue and the correction is not applied. The simulator schedules
	// a request the instant its step starts; a real scheduler takes a
	// moment, emulated here as 2 ms between QUEUED and SCHEDULED.
	c, tr := roofTrace(t, func(r *simRun) { r.sync = true })
	for i := range tr.Requests {
		if tr.Requests[i].FirstScheduledNs >= 0 {
			tr.Requests[i].FirstScheduledNs += 2e6
		}
	}
	cfgs := []Config{{Name: "a", Phys: c, Traces: []*Trace{tr}}}
	on := DefaultOptions()
	off := DefaultOptions()
	off.AlphaCorrection = false
	ron, err := Run(cfgs, on, "test")
	require.NoError(t, err)
	roff, err := Run(cfgs, off, "test")
	require.NoError(t, err)
	require.True(t, ron.Report.Correction.Applied)
	require.Greater(t, ron.Report.Correction.OverheadMs, 0.0)
	// base_bias is not penalized, so shifting the target shifts only it.
	for i := range ron.File.Alpha {
		require.InDelta(t, roff.File.Alpha[i], ron.File.Alpha[i], 1e-9*max(1, math.Abs(roff.File.Alpha[i])), "alpha[%d]", i)
	}
	require.InDelta(t, roff.Report.Alpha.Holdout[0].MAPE, ron.Report.Alpha.Holdout[0].MAPE, 1e-9)
	require.NotEqual(t, ron.Report.Correction.BaseBiasFitted, ron.File.Alpha[3], "written base_bias includes the overhead")
}

func TestNoisyRooflineFitIsPlausible(t *testing.T) {
	c, tr := roofTrace(t, nil)
	res, err := Run([]Config{{Name: "a", Phys: c, Traces: []*Trace{tr}}}, DefaultOptions(), "test")
	require.NoError(t, err)
	b := res.Report.Beta.Holdout[0]
	t.Logf("beta hold-out %+v", b.Errors)
	// 5% multiplicative noise alone gives ~4% MAPE. The roofline's
	// max(compute, memory) is not linear in the features: a step just past
	// the ridge point is predicted as compute plus weight loading, so the
	// mean error is well above the median one.
	require.Less(t, b.MAPE, 0.25)
	require.Less(t, b.MedianAPE, 0.08)
	require.Greater(t, b.MAPE, 0.02, "noise cannot be fitted away")
	ov := res.File.Overheads
	def := sim.DefaultOverheads()
	// The truth's overheads are linear in tokens. The departure overhead is
	// recovered to the µs rounding of the simulator's clock; the arrival
	// overhead, from the lower envelope of ARRIVED → QUEUED, which also
	// holds the wait for the running step, from above, by a small share
	// of a step (~10 ms here).
	require.GreaterOrEqual(t, ov.ArrivalBaseUs+ov.ArrivalPerPromptTokenUs*1000, def.ArrivalBaseUs+def.ArrivalPerPromptTokenUs*1000-2)
	require.InDelta(t, def.ArrivalBaseUs, ov.ArrivalBaseUs, 500)
	require.InDelta(t, def.ArrivalPerPromptTokenUs, ov.ArrivalPerPromptTokenUs, 0.3)
	require.InDelta(t, def.DepartureBaseUs, ov.DepartureBaseUs, 2)
	require.InDelta(t, def.DeparturePerOutputTokenUs, ov.DeparturePerOutputTokenUs, 0.01)
}

func TestTargetSources(t *testing.T) {
	t.Run("journey reconstruction when few pairs are sampled", func(t *testing.T) {
		c, tr := roofTrace(t, func(r *simRun) { r.trace.StepSampleRate = 0.2; r.noise = 0 })
		res, err := Run([]Config{{Name: "a", Phys: c, Traces: []*Trace{tr}}}, DefaultOptions(), "test")
		require.NoError(t, err)
		src := res.Report.Beta.Sources
		require.Greater(t, src[SourceJourney], int64(0))
		require.Greater(t, src[SourcePairs], int64(0))
		require.Contains(t, res.File.Fit.BetaTarget, SourceJourney)
	})
	t.Run("pairs only", func(t *testing.T) {
		c, tr := roofTrace(t, func(r *simRun) { r.trace.StepSampleRate = 0.2 })
		o := DefaultOptions()
		o.BetaTarget = SourcePairs
		res, err := Run([]Config{{Name: "a", Phys: c, Traces: []*Trace{tr}}}, o, "test")
		require.NoError(t, err)
		require.Zero(t, res.Report.Beta.Sources[SourceJourney])
	})
	t.Run("idle gaps are left out", func(t *testing.T) {
		c, tr := roofTrace(t, func(r *simRun) { r.rate = 2 })
		res, err := Run([]Config{{Name: "a", Phys: c, Traces: []*Trace{tr}}}, DefaultOptions(), "test")
		require.NoError(t, err)
		var idle int64
		for _, s := range res.Report.Beta.Skipped {
			if s.Reason == "engine idle after the step" {
				idle = s.Count
			}
		}
		require.Greater(t, idle, int64(10))
		require.Less(t, res.Report.Beta.Holdout[0].MaxAEms, 50.0, "no idle gap in a target")
	})
}

func TestBadInputs(t *testing.T) {
	c, tr := roofTrace(t, func(r *simRun) { r.requests = 200 })
	run := func(tr *Trace, mod func(*Options)) (*Result, error) {
		o := DefaultOptions()
		if mod != nil {
			mod(&o)
		}
		return Run([]Config{{Name: "cfg-x", Phys: c, Traces: []*Trace{tr}}}, o, "test")
	}
	t.Run("empty steps", func(t *testing.T) {
		_, err := run(&Trace{Dir: "empty"}, nil)
		require.ErrorContains(t, err, "configuration cfg-x: 0 usable beta samples")
	})
	t.Run("too few rows for the folds", func(t *testing.T) {
		short := *tr
		short.Steps = tr.Steps[:18]
		_, err := run(&short, nil)
		require.ErrorContains(t, err, "5-fold CV needs at least 10")
		require.ErrorContains(t, err, "warm-up step")
	})
	t.Run("no configuration", func(t *testing.T) {
		_, err := Run(nil, DefaultOptions(), "test")
		require.Error(t, err)
	})
	t.Run("non-finite and negative rows are dropped and counted", func(t *testing.T) {
		bad := *tr
		bad.Steps = append([]StepRow(nil), tr.Steps...)
		bad.Steps[100].KVUsage = math.NaN()
		bad.Steps[101].Running = -1
		res, err := run(&bad, nil)
		require.NoError(t, err)
		require.Contains(t, res.Report.Configs[0].Dropped, Count{"step with a negative count or a KV usage outside [0,1]", 2})
	})
	t.Run("all-zero feature columns", func(t *testing.T) {
		// No offload, TP 1, dense: several beta features are 0 everywhere.
		res, err := run(tr, nil)
		require.NoError(t, err)
		require.Contains(t, res.Report.Beta.Solve.Dropped, "cpu_offload_transfer")
		require.Contains(t, res.Report.Beta.Solve.Dropped, "tp_comm_bandwidth")
		for i, v := range res.File.Beta {
			require.False(t, math.IsNaN(v) || math.IsInf(v, 0), "beta[%d]", i)
		}
	})
	t.Run("no journey data: alpha written as zeros with a reason", func(t *testing.T) {
		nj := *tr
		nj.Requests = nil
		res, err := run(&nj, nil)
		require.NoError(t, err)
		require.False(t, res.Report.Alpha.Fitted)
		require.Contains(t, res.Report.Alpha.NotFitted, "0 usable alpha samples")
		require.Contains(t, res.File.Provenance.Notes, "alpha not fitted")
		require.Equal(t, 0.0, res.File.Alpha[3])
	})
	t.Run("kv total differs from the configuration", func(t *testing.T) {
		other := *tr
		other.Steps = append([]StepRow(nil), tr.Steps...)
		for i := range other.Steps {
			other.Steps[i].KVTotal = 123
		}
		_, err := run(&other, nil)
		require.ErrorContains(t, err, "kv.blocks_total_gpu = 123")
	})
}

func TestChunkedPrefillWithoutSnapshotsIsAnError(t *testing.T) {
	c, tr := roofTrace(t, func(r *simRun) { r.trace.RichSubsampleRate = 0 })
	_, err := Run([]Config{{Name: "a", Phys: c, Traces: []*Trace{tr}}}, DefaultOptions(), "test")
	require.ErrorContains(t, err, "chunked prefill is on and none of its")
	require.ErrorContains(t, err, "rich-subsample-rate")
}

func TestNonRichFallbackWithoutChunkedPrefill(t *testing.T) {
	c, tr := roofTrace(t, func(r *simRun) { r.trace.RichSubsampleRate = 0; r.knobs.ChunkedPrefillEnabled = false; r.noise = 0 })
	res, err := Run([]Config{{Name: "a", Phys: c, Traces: []*Trace{tr}}}, DefaultOptions(), "test")
	require.NoError(t, err)
	require.Zero(t, res.Report.Configs[0].RichSamples)
	require.Less(t, res.Report.Beta.Holdout[0].MAPE, 0.10)
}

func TestLeaveOneConfigOut(t *testing.T) {
	c1, tr1 := roofTrace(t, nil)
	c2, tr2 := roofTrace(t, func(r *simRun) { r.knobs.MaxNumSeqs = 32; r.seed = 9 })
	res, err := Run([]Config{{Name: "s64", Phys: c1, Traces: []*Trace{tr1}}, {Name: "s32", Phys: c2, Traces: []*Trace{tr2}}}, DefaultOptions(), "test")
	require.NoError(t, err)
	require.Len(t, res.Report.Beta.LeaveOneOut, 2)
	require.Len(t, res.Report.Beta.Holdout, 2)
	require.Equal(t, int64(64), res.File.AppliesTo.VLLM.MaxNumSeqs, "applies to the first configuration")
	// fitted_configs lists both, with their samples.
	fc := res.File.FittedConfigs
	require.Len(t, fc, 2)
	require.Equal(t, []string{"s64", "s32"}, []string{fc[0].Name, fc[1].Name})
	require.Equal(t, []int64{64, 32}, []int64{fc[0].MaxNumSeqs, fc[1].MaxNumSeqs})
	require.Equal(t, coefficients.ArchDense, fc[1].Architecture)
	require.Equal(t, res.File.Fit.SamplesBeta, fc[0].SamplesBeta+fc[1].SamplesBeta)
	require.Equal(t, res.File.Fit.SamplesAlpha, fc[0].SamplesAlpha+fc[1].SamplesAlpha)
	require.Positive(t, fc[1].SamplesAlpha)
	for _, c := range []*physics.PhysicsConfig{c1, c2} {
		w, err := res.File.Check(c)
		require.NoError(t, err)
		require.Empty(t, w, "each fitted configuration is in the span")
	}
	for _, l := range res.Report.Beta.LeaveOneOut {
		require.Less(t, l.MAPE, 0.25, l.Config)
	}

	// Both objectives are reported (docs/fit.md): the other one on
	// the same splits, and fitting it changes nothing of the chosen fit.
	oo := res.Report.Beta.OtherObjective
	require.NotNil(t, oo)
	require.Equal(t, coefficients.ObjectiveAbsolute, oo.Objective)
	require.Len(t, oo.Holdout, 2)
	require.Len(t, oo.LeaveOneOut, 2)
	for i, h := range oo.Holdout {
		require.Equal(t, res.Report.Beta.Holdout[i].N, h.N)
		require.Equal(t, res.Report.Beta.LeaveOneOut[i].N, oo.LeaveOneOut[i].N)
		require.Positive(t, h.MAPE)
		require.NotEqual(t, res.Report.Beta.Holdout[i].MAPE, h.MAPE, "another fit")
	}
	o := DefaultOptions()
	o.CompareObjectives = false
	alone, err := Run([]Config{{Name: "s64", Phys: c1, Traces: []*Trace{tr1}}, {Name: "s32", Phys: c2, Traces: []*Trace{tr2}}}, o, "test")
	require.NoError(t, err)
	require.Nil(t, alone.Report.Beta.OtherObjective)
	require.Equal(t, alone.File.Beta, res.File.Beta)
	require.Equal(t, alone.Report.Beta.Holdout, res.Report.Beta.Holdout)
	var md bytes.Buffer
	require.NoError(t, res.Report.WriteMarkdown(&md, nil))
	require.Contains(t, md.String(), "fitted under the absolute objective instead")
}

func TestMedianMatchesSorting(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 1; n < 300; n++ {
		xs := make([]float64, n)
		for i := range xs {
			switch n % 3 {
			case 0:
				xs[i] = float64(rng.IntN(5)) // many ties
			case 1:
				xs[i] = float64(n - i) // sorted descending
			default:
				xs[i] = rng.NormFloat64()
			}
		}
		orig := slices.Clone(xs)
		s := slices.Clone(xs)
		slices.Sort(s)
		want := s[n/2]
		if n%2 == 0 {
			want = (s[n/2-1] + s[n/2]) / 2
		}
		require.Equal(t, want, medianOf(xs), "n=%d", n)
		require.Equal(t, orig, xs, "input unchanged")
		k := rng.IntN(n)
		require.Equal(t, s[k], selectKth(slices.Clone(xs), k))
	}
	require.True(t, math.IsNaN(medianOf(nil)))
}

// TestLastStepSkipReason: a trace records no step end, so its last step is
// a sample only when a journey SCHEDULED of the next step id ends it;
// otherwise it is counted under SkipLastStep, not mixed with steps whose
// successor was not sampled (tools/physics_trainer's
// test_the_last_step_is_named_when_nothing_ends_it).
func TestLastStepSkipReason(t *testing.T) {
	m, err := physics.LoadModel("llama-3.1-8b")
	require.NoError(t, err)
	h, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	k := physics.DefaultVLLMKnobs()
	k.TotalKVBlocksGPU = 1000
	c, err := physics.NewPhysicsConfig(m, h, 1, k)
	require.NoError(t, err)
	const ms = int64(1_000_000)
	step := func(id, ts int64) StepRow {
		return StepRow{ID: id, TsStartNs: ts, Running: 4, Waiting: 1, NumDecode: 4, Scheduled: 4, DecodeTok: 4,
			KVTotal: 1000, KVFree: 500, KVUsage: 0.5}
	}
	steps := []StepRow{step(11, 0), step(12, 3*ms), step(14, 9*ms), step(15, 10*ms)}
	for _, tc := range []struct {
		target string
		sched  []ScheduledRow
		kept   []int64
		want   []Count
	}{
		{SourcePairs, nil, []int64{11, 14}, []Count{{"next step not sampled", 1}, {SkipLastStep, 1}}},
		{SourceJourney, []ScheduledRow{{Step: 12, TsNs: 3 * ms}, {Step: 15, TsNs: 10 * ms}}, []int64{11, 14},
			[]Count{{"no timestamp of the next step", 1}, {SkipLastStep, 1}}},
		{SourceJourney, []ScheduledRow{{Step: 12, TsNs: 3 * ms}, {Step: 15, TsNs: 10 * ms}, {Step: 16, TsNs: 12 * ms}},
			[]int64{11, 14, 15}, []Count{{"no timestamp of the next step", 1}}},
	} {
		o := DefaultOptions()
		o.BetaTarget = tc.target
		tr := &Trace{Steps: steps, Scheduled: tc.sched}
		bb := newBetaBuilder(c, &o)
		x := newStepIndex(tr, o.Gammas, new([]Count))
		bb.add(0, tr, x)
		var kept []int64
		for _, r := range bb.out.ref {
			kept = append(kept, x.steps[r].ID)
		}
		require.Equal(t, tc.kept, kept, tc.target)
		require.Equal(t, sortedCounts(tc.want), sortedCounts(bb.skipped), tc.target)
	}
}

// outlierTrace is a trace of Llama-3.1-8B on H100 (chunked prefill off)
// whose steps have the given scheduled tokens (prefill when ≥ 1000) and
// cycle times in ms, plus a last step that ends the previous one.
func outlierTrace(t *testing.T, tokens []int64, ms []float64) (*betaBuilder, *stepIndex) {
	t.Helper()
	m, err := physics.LoadModel("llama-3.1-8b")
	require.NoError(t, err)
	h, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	k := physics.DefaultVLLMKnobs()
	k.TotalKVBlocksGPU, k.ChunkedPrefillEnabled = 1000, false
	c, err := physics.NewPhysicsConfig(m, h, 1, k)
	require.NoError(t, err)
	var steps []StepRow
	ts := int64(0)
	for i := range len(tokens) + 1 {
		s := StepRow{ID: int64(11 + i), TsStartNs: ts, Running: 4, Waiting: 1, NumDecode: 4, Scheduled: 4, DecodeTok: 4,
			KVTotal: 1000, KVFree: 500, KVUsage: 0.5}
		if i < len(tokens) {
			if n := tokens[i]; n >= 1000 {
				s.NumDecode, s.DecodeTok, s.NumPrefill, s.PrefillTok, s.Scheduled, s.Running = 0, 0, 1, n, n, 1
			} else {
				s.NumDecode, s.DecodeTok, s.Scheduled, s.Running = n, n, n, n
			}
			ts += int64(ms[i] * 1e6)
		}
		steps = append(steps, s)
	}
	o := DefaultOptions()
	tr := &Trace{Dir: "trace", Steps: steps}
	bb := newBetaBuilder(c, &o)
	x := newStepIndex(tr, o.Gammas, new([]Count))
	bb.add(0, tr, x)
	return bb, x
}

// TestOutlierRuleKeepsEveryRegime (docs/fit.md, cleaning: outliers): rare large
// prefills form token buckets too small to judge and are kept, however
// much slower than the decode steps they are; a step slower than 5 × its
// own bucket's median is removed, and one faster than the hardware allows
// (features.LowerBoundSeconds) is removed in any bucket. Every removal is
// listed with the limit it crossed (tools/physics_trainer's
// test_outlier_rule_keeps_every_regime).
func TestOutlierRuleKeepsEveryRegime(t *testing.T) {
	var tokens []int64
	var ms []float64
	for range 40 {
		tokens, ms = append(tokens, 4), append(ms, 10) // bucket 3, median 10 ms
	}
	tokens, ms = append(tokens, 4, 4), append(ms, 60, 45) // > 50 ms: out; 45: in
	tokens, ms = append(tokens, 4000, 4000, 6000), append(ms, 300, 310, 450)
	tokens, ms = append(tokens, 8000), append(ms, 1) // 8000 tokens of an 8B model in 1 ms: impossible
	bb, x := outlierTrace(t, tokens, ms)
	med, sum := bb.dropOutliers(5)
	require.InDelta(t, 0.010, med, 1e-12)
	var kept []float64
	for i := range bb.out.len() {
		kept = append(kept, bb.out.y[i]*1e3)
	}
	require.Len(t, kept, 40+1+3)
	require.InDelta(t, 45, kept[40], 1e-9)
	require.InDeltaSlice(t, []float64{300, 310, 450}, kept[41:], 1e-9, "the large prefills are kept")
	require.Equal(t, int64(4), sum.Unjudged, "the 4000-8000-token steps are in buckets of fewer than 20 steps")
	require.Len(t, sum.Removed, 2)
	slow, fast := sum.Removed[0], sum.Removed[1]
	require.Equal(t, OutlierTooSlow, slow.Reason)
	require.Equal(t, x.steps[40].ID, slow.StepID)
	require.InDelta(t, 60, slow.Ms, 1e-9)
	require.InDelta(t, 50, slow.LimitMs, 1e-9)
	require.Equal(t, "trace", slow.Trace)
	require.Equal(t, OutlierTooFast, fast.Reason)
	require.Equal(t, int64(8000), fast.Tokens)
	in := features.BetaInput{PrefillTokens: 8000, ScheduledTokens: 8000, NumPrefillReqs: 1, SumPrefillAttnWork: 8000 * 8000}
	require.InDelta(t, features.LowerBoundSeconds(bb.cfg, &in)*1e3, fast.LimitMs, 1e-9)
	require.Greater(t, fast.LimitMs, 100.0)
	require.Equal(t, sortedCounts([]Count{{OutlierTooSlow, 1}, {OutlierTooFast, 1}, {SkipLastStep, 1}}), sortedCounts(bb.skipped))

	// Factor 0: nothing is judged or removed.
	bb, _ = outlierTrace(t, tokens, ms)
	_, sum = bb.dropOutliers(0)
	require.Equal(t, len(tokens), bb.out.len())
	require.Empty(t, sum.Removed)
}

// TestOutlierRuleRemovesLessThanHalfOfABucket: whatever the times, the
// slow rule keeps more than half of every bucket, so no regime can go.
func TestOutlierRuleRemovesLessThanHalfOfABucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 3))
	for trial := range 30 {
		n := 20 + rng.IntN(200)
		tokens, ms := make([]int64, n), make([]float64, n)
		for i := range n {
			tokens[i] = int64(1 + rng.IntN(900))
			ms[i] = 20 * math.Exp(3*rng.NormFloat64()) // wildly spread, always above the lower bound of ≤ 900 tokens
			ms[i] = max(ms[i], 20)
		}
		factor := 1.01 + 10*rng.Float64()
		bb, x := outlierTrace(t, tokens, ms)
		before := map[int]int{}
		for i := range bb.out.len() {
			before[tokenBucket(x.steps[bb.out.ref[i]].Scheduled)]++
		}
		_, sum := bb.dropOutliers(factor)
		removed := map[int]int{}
		for _, r := range sum.Removed {
			require.Equal(t, OutlierTooSlow, r.Reason, "trial %d", trial)
			removed[tokenBucket(r.Tokens)]++
		}
		for b, k := range removed {
			require.GreaterOrEqual(t, before[b], MinOutlierBucket, "trial %d: bucket %d of %d steps judged", trial, b, before[b])
			require.Less(t, 2*k, before[b], "trial %d: bucket %d lost %d of %d", trial, b, k, before[b])
		}
		require.Equal(t, n-len(sum.Removed), bb.out.len())
	}
}

// The acceptance verdict is beta's (docs/physics-spec.md §9): alpha's
// failing checks stay in the report but do not fail it, beta's do.
func TestAcceptanceVerdictIsBetas(t *testing.T) {
	ok := Check{Check: "x", Pass: true}
	bad := Check{Check: "y", Pass: false}
	r := Report{Beta: VectorReport{Fitted: true, Checks: []Check{ok}}, Alpha: VectorReport{Fitted: true, Checks: []Check{ok, bad}}}
	require.True(t, r.verdict())
	r.Beta.Checks = append(r.Beta.Checks, bad)
	require.False(t, r.verdict())
	r = Report{Beta: VectorReport{Fitted: false}}
	require.False(t, r.verdict(), "no beta, no verdict")
	// On a fit, the report's verdict is that.
	c, tr := roofTrace(t, nil)
	res, err := Run([]Config{{Name: "a", Phys: c, Traces: []*Trace{tr}}}, DefaultOptions(), "test")
	require.NoError(t, err)
	require.NotEmpty(t, res.Report.Alpha.Checks)
	require.Equal(t, res.Report.verdict(), res.Report.Pass)
}
