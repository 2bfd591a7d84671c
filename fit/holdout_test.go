package fit

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/coefficients"
)

// TestResolveHoldout: the three forms of T, and the splits that would
// leave nothing on one side, refused with the forms named.
func TestResolveHoldout(t *testing.T) {
	tr := &Trace{Requests: []RequestRow{
		{ArrivedWallNs: 1_000_000_000_000, QueuedWallNs: 1_000_000_100_000},
		{ArrivedWallNs: -1, QueuedWallNs: 1_060_000_000_000}, // placed by QUEUED
		{ArrivedWallNs: 1_100_000_000_000, QueuedWallNs: -1},
		{ArrivedWallNs: -1, QueuedWallNs: -1}, // not placed
	}}
	traces := []*Trace{tr}
	for _, c := range []struct {
		spec string
		want int64
		err  string
	}{
		{spec: "30s", want: 1_030_000_000_000},
		{spec: "1m30s", want: 1_090_000_000_000},
		{spec: "80%", want: 1_080_000_000_000},
		{spec: " 50% ", want: 1_050_000_000_000},
		{spec: "0.001%", want: 1_000_001_000_000},
		{spec: "1970-01-01T00:17:00Z", want: 1_020_000_000_000},
		{spec: "1970-01-01T00:17:00.5+00:00", want: 1_020_500_000_000},
		{spec: "0%", err: "a share must be in (0%, 100%)"},
		{spec: "100%", err: "a share must be in (0%, 100%)"},
		{spec: "NaN%", err: "a share must be in (0%, 100%)"},
		{spec: "-5%", err: "a share must be in (0%, 100%)"},
		{spec: "0s", err: "not a positive duration"},
		{spec: "-10s", err: "not a positive duration"},
		{spec: "80", err: "not a positive duration; give a duration after the first arrival (600s, 10m), a share"},
		{spec: "101s", err: "the traces' arrivals span 1m40s, so nothing would be held out"},
		{spec: "100s", err: "is at or after the last arrival"},
		{spec: "1970-01-01T00:16:00Z", err: "is before the first arrival (1970-01-01T00:16:40Z): every request would be held out"},
		{spec: "1970-01-01T00:18:20Z", err: "is at or after the last arrival"},
		{spec: "1970-13-01T00:00:00Z", err: "month out of range"},
		{spec: "", err: "not a positive duration"},
	} {
		got, err := ResolveHoldout(c.spec, traces)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.spec)
			continue
		}
		require.NoError(t, err, c.spec)
		require.Equal(t, c.want, got, c.spec)
	}
	_, err := ResolveHoldout("50%", []*Trace{{Requests: []RequestRow{{ArrivedWallNs: -1, QueuedWallNs: -1}}}})
	require.ErrorContains(t, err, "no request of the traces has a wall-clock arrival")
}

// TestHoldOutRemovesTheEnd: on a simulated trace, the split keeps exactly
// the requests that arrived before it and the steps that started before
// it (placed on the wall clock through the engine's QUEUED offset), with
// their snapshots, and counts what it removed; a fit then runs on what is
// left.
func TestHoldOutRemovesTheEnd(t *testing.T) {
	dir := t.TempDir()
	c := simulate(t, dir, defaultSimRun())
	full, err := LoadTrace(filepath.Join(dir, "tables"))
	require.NoError(t, err)
	tr, err := LoadTrace(filepath.Join(dir, "tables"))
	require.NoError(t, err)
	cut, err := ResolveHoldout("75%", []*Trace{tr})
	require.NoError(t, err)
	h := coefficients.NewHoldout(cut, 0, 0)
	reqs, steps, err := tr.HoldOut(h)
	require.NoError(t, err)
	require.Equal(t, int64(len(full.Requests)-len(tr.Requests)), reqs)
	require.Equal(t, int64(len(full.Steps)-len(tr.Steps)), steps)
	require.Positive(t, reqs)
	require.Positive(t, steps)
	require.Positive(t, len(tr.Requests))

	// The simulator's clocks are a fixed base plus simulated time: one
	// offset for the whole engine.
	offset := full.Requests[0].QueuedWallNs - full.Requests[0].QueuedNs
	for _, r := range full.Requests {
		require.Equal(t, offset, r.QueuedWallNs-r.QueuedNs)
	}
	for _, r := range tr.Requests {
		require.LessOrEqual(t, r.ArrivedWallNs, cut)
	}
	kept := map[int64]bool{}
	for _, s := range tr.Steps {
		require.LessOrEqual(t, s.TsStartNs+offset, cut)
		kept[s.ID] = true
	}
	for _, s := range full.Steps {
		if s.TsStartNs+offset <= cut {
			require.True(t, kept[s.ID], "step %d started before the split", s.ID)
		}
	}
	for _, sn := range tr.Snapshots {
		require.True(t, kept[sn.StepID], "snapshot of held-out step %d", sn.StepID)
	}
	require.Less(t, len(tr.Snapshots), len(full.Snapshots))

	res, err := Run([]Config{{Name: "held", Phys: c, Traces: []*Trace{tr}}}, DefaultOptions(), "test")
	require.NoError(t, err)
	require.Positive(t, res.File.Fit.SamplesBeta)
	require.LessOrEqual(t, res.File.Fit.SamplesBeta, int64(len(tr.Steps)))
	require.LessOrEqual(t, res.File.Fit.SamplesAlpha, int64(len(tr.Requests)))
}

// TestHoldOutNeedsTheEnginesClock: steps of an engine none of whose
// requests has both QUEUED times cannot be placed, and the split says so.
func TestHoldOutNeedsTheEnginesClock(t *testing.T) {
	tr := &Trace{Dir: "tables", Instances: []string{"engine-0"},
		Steps:    []StepRow{{ID: 11, TsStartNs: 5}},
		Requests: []RequestRow{{ArrivedWallNs: 10, QueuedWallNs: -1, QueuedNs: -1}}}
	_, _, err := tr.HoldOut(coefficients.NewHoldout(100, 0, 0))
	require.ErrorContains(t, err, `tables: the steps of engine "engine-0" cannot be placed on the wall clock`)
}

// TestHoldOutPerEngine: in a cluster's trace each engine's steps are put
// on the wall clock by that engine's own offset.
func TestHoldOutPerEngine(t *testing.T) {
	ids := []string{"instance_0", "instance_1"}
	runs := make([]simRun, len(ids))
	for k := range runs {
		r := defaultSimRun()
		r.requests, r.seed = 200, 11+int64(k)
		r.reqs = workloadOf(t, r)
		for i := range r.reqs {
			r.reqs[i].ID += int64(k) * 1_000_000
		}
		runs[k] = r
	}
	dir := t.TempDir()
	simulateEngines(t, dir, runs, ids)
	full, err := LoadTrace(filepath.Join(dir, "tables"))
	require.NoError(t, err)
	tr, err := LoadTrace(filepath.Join(dir, "tables"))
	require.NoError(t, err)
	require.Len(t, tr.Instances, 2)
	cut, err := ResolveHoldout("60%", []*Trace{tr})
	require.NoError(t, err)
	_, steps, err := tr.HoldOut(coefficients.NewHoldout(cut, 0, 0))
	require.NoError(t, err)
	offset := map[int32]int64{}
	for _, r := range full.Requests {
		offset[r.Inst] = r.QueuedWallNs - r.QueuedNs
	}
	var want int64
	for _, s := range full.Steps {
		if s.TsStartNs+offset[s.Inst] > cut {
			want++
		}
	}
	require.Equal(t, want, steps)
	perEngine := map[int32]int{}
	for _, s := range tr.Steps {
		require.LessOrEqual(t, s.TsStartNs+offset[s.Inst], cut)
		perEngine[s.Inst]++
	}
	require.Len(t, perEngine, 2, "both engines keep steps")
}
