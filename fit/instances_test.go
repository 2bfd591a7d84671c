package fit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/otlpingest"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// A cluster's trace: two engines, each counting its steps from 1, write
// one file. The fit takes each engine as a time series of its own, so that
// fitting the cluster's trace is fitting the engines' traces written
// apart, as two traces of one configuration, bit for bit; and it recovers
// the truth as well as one engine's trace alone does.
func TestClusterTraceFitsPerEngine(t *testing.T) {
	ids := []string{"instance_0", "instance_1"}
	runs := make([]simRun, len(ids))
	for k := range runs {
		r := defaultSimRun()
		r.latency = func(c *physics.PhysicsConfig) sim.LatencyModel {
			return &sim.Physics{Cfg: c, Beta: truthBeta, Gamma: 0.3, Overheads: sim.DefaultOverheads()}
		}
		r.seed = 7 + int64(k)
		r.reqs = workloadOf(t, r)
		for i := range r.reqs {
			r.reqs[i].ID += int64(k) * 1_000_000 // unique across the cluster
		}
		runs[k] = r
	}
	clusterDir := t.TempDir()
	c := simulateEngines(t, clusterDir, runs, ids)
	apartDirs := []string{t.TempDir(), t.TempDir()}
	for k := range runs {
		simulateEngines(t, apartDirs[k], runs[k:k+1], []string{""})
	}

	data, err := os.ReadFile(filepath.Join(clusterDir, "tables", "manifest.json"))
	require.NoError(t, err)
	var m otlpingest.Manifest
	require.NoError(t, json.Unmarshal(data, &m))
	for _, ic := range m.Issues.ByKind {
		assert.NotEqual(t, otlpingest.IssueDuplicateSpan, ic.Kind, "no step span of one engine may pass for a repeat of the other's")
	}

	cluster, err := LoadTrace(filepath.Join(clusterDir, "tables"))
	require.NoError(t, err)
	require.Equal(t, ids, cluster.Instances)
	var apart []*Trace
	for k, d := range apartDirs {
		tr, err := LoadTrace(filepath.Join(d, "tables"))
		require.NoError(t, err)
		require.Equal(t, []string{""}, tr.Instances)
		n := 0
		for _, s := range cluster.Steps {
			if s.Inst == int32(k) {
				n++
			}
		}
		require.Equal(t, len(tr.Steps), n, "%s: every step of the engine is in the cluster's steps table", ids[k])
		apart = append(apart, tr)
	}

	opt := DefaultOptions()
	opt.Spec = features.SpecV1 // the truth is spec 1.0's
	fitOf := func(traces ...*Trace) *Result {
		res, err := Run([]Config{{Name: "llama", Phys: c, Traces: traces}}, opt, "test")
		require.NoError(t, err)
		return res
	}
	got, want, one := fitOf(cluster), fitOf(apart...), fitOf(apart[0])
	assert.Equal(t, want.File.Beta, got.File.Beta, "beta")
	assert.Equal(t, want.File.Alpha, got.File.Alpha, "alpha")
	assert.Equal(t, want.File.Overheads, got.File.Overheads, "overheads")
	assert.Equal(t, want.Report.Beta.Samples, got.Report.Beta.Samples)
	assert.Equal(t, want.Report.Beta.Sources, got.Report.Beta.Sources)
	assert.Equal(t, want.Report.Beta.Skipped, got.Report.Beta.Skipped)
	assert.Equal(t, want.Report.Beta.Holdout, got.Report.Beta.Holdout)
	assert.Equal(t, want.Report.Alpha.Samples, got.Report.Alpha.Samples)
	assert.Equal(t, want.Report.Configs[0].Dropped, got.Report.Configs[0].Dropped)
	for _, d := range got.Report.Configs[0].Dropped {
		assert.NotEqual(t, "duplicate step id (first kept)", d.Reason)
	}
	assert.Greater(t, got.Report.Beta.Samples, one.Report.Beta.Samples*3/2, "both engines' samples")
	t.Logf("hold-out beta MAPE: cluster %.4f%%, one engine %.4f%%", got.Report.Beta.Holdout[0].MAPE*100, one.Report.Beta.Holdout[0].MAPE*100)
	require.Less(t, got.Report.Beta.Holdout[0].MAPE, 0.01)
	require.Less(t, one.Report.Beta.Holdout[0].MAPE, 0.01)

	// calibrate predict scores the cluster's samples as those of its engines.
	evGot, err := Evaluate(Config{Name: "llama", Phys: c, Traces: []*Trace{cluster}}, got.File, opt, false)
	require.NoError(t, err)
	evWant, err := Evaluate(Config{Name: "llama", Phys: c, Traces: apart}, got.File, opt, false)
	require.NoError(t, err)
	assert.Equal(t, evWant, evGot)

	// The same rows taken as one engine: the step ids collide.
	merged := *cluster
	merged.Instances = []string{""}
	var dropped []Count
	newStepIndex(&merged, opt.Gammas, &dropped)
	assert.Contains(t, dropped, Count{"duplicate step id (first kept)", int64(min(len(apart[0].Steps), len(apart[1].Steps)))},
		"merging the engines would lose one engine's steps as duplicates")
}

// engines splits a trace by instance, keeping each engine's rows in table
// order; a trace of one instance is its own engine; KV events, which name
// no engine, make a trace of several engines with steps an error.
func TestEngines(t *testing.T) {
	tr := &Trace{Dir: "tables", Instances: []string{"a", "b"},
		Steps:     []StepRow{{ID: 1, Inst: 1}, {ID: 1, Inst: 0}, {ID: 2, Inst: 1}, {ID: 2, Inst: 0}},
		Snapshots: []SnapshotRow{{StepID: 2, Request: "r1", Inst: 1}},
		Requests:  []RequestRow{{EngineID: "r0", Inst: 0}, {EngineID: "r1", Inst: 1}},
		Scheduled: []ScheduledRow{{Step: 1, TsNs: 5, Inst: 0}, {Step: 1, TsNs: 7, Inst: 1}},
		HasKV:     true,
	}
	engs, err := tr.engines()
	require.NoError(t, err)
	require.Len(t, engs, 2)
	for k, want := range []*Trace{
		{Dir: "tables", Instances: []string{"a"}, HasKV: true, Steps: []StepRow{{ID: 1}, {ID: 2}},
			Requests: []RequestRow{{EngineID: "r0"}}, Scheduled: []ScheduledRow{{Step: 1, TsNs: 5}}},
		{Dir: "tables", Instances: []string{"b"}, HasKV: true, Steps: []StepRow{{ID: 1}, {ID: 2}},
			Snapshots: []SnapshotRow{{StepID: 2, Request: "r1"}}, Requests: []RequestRow{{EngineID: "r1"}},
			Scheduled: []ScheduledRow{{Step: 1, TsNs: 7}}},
	} {
		assert.Equal(t, want, engs[k], "engine %d", k)
	}
	assert.Equal(t, `tables (instance "b")`, engs[1].engineName())

	one := &Trace{Dir: "t", Instances: []string{""}, Steps: []StepRow{{ID: 1}}, KV: []KVRow{{Type: "TransferCompleted"}}}
	engs, err = one.engines()
	require.NoError(t, err)
	require.Equal(t, []*Trace{one}, engs)
	assert.Equal(t, "t", one.engineName())

	kv := []KVRow{{Type: "TransferCompleted", Blocks: 3, Step: 2, Success: true}}
	tr.KV = kv
	_, err = tr.engines()
	require.Error(t, err)
	for _, s := range []string{"tables:", "2 engines", `"a", "b"`, "KV events lines name no engine", "without its KV events"} {
		assert.Contains(t, err.Error(), s)
	}

	// One engine with steps, and requests without an instance (an API
	// server without one refused them): the KV events are that engine's.
	apiOnly := &Trace{Dir: "tables", Instances: []string{"", "a"}, HasKV: true, KV: kv,
		Steps:    []StepRow{{ID: 1, Inst: 1}, {ID: 2, Inst: 1}},
		Requests: []RequestRow{{EngineID: "", Inst: 0}, {EngineID: "r0", Inst: 1}},
	}
	engs, err = apiOnly.engines()
	require.NoError(t, err)
	require.Len(t, engs, 2)
	assert.Equal(t, &Trace{Dir: "tables", Instances: []string{""}, HasKV: true, Requests: []RequestRow{{}}}, engs[0])
	assert.Equal(t, &Trace{Dir: "tables", Instances: []string{"a"}, HasKV: true, KV: kv, Steps: []StepRow{{ID: 1}, {ID: 2}},
		Requests: []RequestRow{{EngineID: "r0"}}}, engs[1])
}

// Tables without an instance column (written before it existed) are one
// engine.
func TestLoadTraceWithoutInstanceColumn(t *testing.T) {
	dir := t.TempDir()
	m, err := physics.LoadModel("llama-3.1-8b")
	require.NoError(t, err)
	h, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	c, err := physics.NewPhysicsConfig(m, h, 1, physics.DefaultVLLMKnobs())
	require.NoError(t, err)
	writeSynthTables(t, dir, c, 200)
	tr, err := LoadTrace(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{""}, tr.Instances)
	assert.Len(t, tr.Steps, 200)
	for _, s := range tr.Steps {
		require.Zero(t, s.Inst)
	}
}
