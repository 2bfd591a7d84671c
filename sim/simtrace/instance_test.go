package simtrace

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/internal/testsupport/simtest"
	"github.com/blis-sim/blis/otlpingest"
	"github.com/blis-sim/blis/sim"
)

// wholeLines is an io.Writer that fails the test when a Write does not end
// a line: Writers that share an output must not mix their lines.
type wholeLines struct {
	t   *testing.T
	buf bytes.Buffer
}

func (w *wholeLines) Write(p []byte) (int, error) {
	if len(p) > 0 && p[len(p)-1] != '\n' {
		w.t.Errorf("a Write of %d bytes ends inside a line", len(p))
	}
	return w.buf.Write(p)
}

func instanceOptions(id string) Options {
	opt := DefaultOptions()
	opt.StepSampleRate, opt.RichSubsampleRate = 0.5, 0.2
	opt.ClosureInterval, opt.MaxEventsPerSpan, opt.SpansPerLine = 10, 1<<20, 64
	opt.InstanceID = id
	return opt
}

// runCluster runs one engine per workload on one clock, as package cluster
// does (the earliest next event first, the lowest index on ties), each
// traced by a Writer of its instance id into the shared trace and kv
// outputs, so that the engines' lines interleave.
func runCluster(t *testing.T, trace *bufio.Writer, kv *wholeLines, ids []string, reqs [][]sim.RequestSpec) ([]Stats, []*sim.Result) {
	t.Helper()
	engines := make([]*sim.Engine, len(ids))
	writers := make([]*Writer, len(ids))
	for k, id := range ids {
		rng := sim.NewRNG(42)
		w, err := NewWriter(trace, kv, instanceOptions(id), rng.Stream(sim.StreamTraceJourney), rng.Stream(sim.StreamTraceStep))
		require.NoError(t, err)
		cfg := offloadConfig()
		cfg.Observer = w
		engines[k], err = sim.NewEngine(cfg)
		require.NoError(t, err)
		writers[k] = w
	}
	require.NoError(t, simtest.Interleave(engines, reqs))
	stats := make([]Stats, len(ids))
	results := make([]*sim.Result, len(ids))
	for k, e := range engines {
		var err error
		results[k], err = e.Finish()
		require.NoError(t, err)
		require.NoError(t, writers[k].Close())
		stats[k] = writers[k].Stats()
	}
	return stats, results
}

// Two engines write one trace, as a cluster does: every span names its
// instance, the engines' step spans (each numbered from 1) never share ids,
// an engine's trace differs from the same run without InstanceID only in
// the instance attribute and the step span ids, the KV events lines stay
// whole, and ingest gives each engine's steps complete and apart.
func TestInstancesShareOneTrace(t *testing.T) {
	dir := t.TempDir()
	reqs := workload(400, 11, 30_000)
	other := make([]sim.RequestSpec, len(reqs)) // request ids unique across the cluster
	for i, r := range reqs {
		r.ID += 1_000_000
		other[i] = r
	}
	ids := []string{"instance_0", "instance_1"}

	// The first engine's run alone, without InstanceID.
	baseRun := simulate(t, offloadConfig(), reqs, instanceOptions(""), 42)

	sharedPath := filepath.Join(dir, "cluster.jsonl")
	f, err := os.Create(sharedPath)
	require.NoError(t, err)
	b := bufio.NewWriter(f)
	kv := &wholeLines{t: t}
	stats, results := runCluster(t, b, kv, ids, [][]sim.RequestSpec{reqs, other})
	require.NoError(t, b.Flush())
	require.NoError(t, f.Close())
	require.NotZero(t, kv.buf.Len(), "the offload runs must write KV events")

	base := spansOf(t, baseRun.tracePath)
	shared := spansOf(t, sharedPath)
	byInstance := map[string][]otlpingest.Span{}
	for _, sp := range shared {
		byInstance[sp.Instance] = append(byInstance[sp.Instance], sp)
	}
	require.Len(t, byInstance, 2, "every span names its instance")
	for _, sp := range base {
		require.Empty(t, sp.Instance, "no instance without InstanceID")
	}

	// The same run as instance_0: only the instance and the step span ids
	// differ (and the records, as the engines' lines interleave).
	first := byInstance[ids[0]]
	require.Len(t, first, len(base))
	for i := range base {
		got := first[i]
		got.Instance, got.Record = "", base[i].Record
		if strings.HasPrefix(got.Name, otlpingest.StepSpanPrefix) {
			assert.NotEqual(t, base[i].TraceID, got.TraceID, "step span %s: salted trace id", got.Name)
			assert.NotEqual(t, base[i].SpanID, got.SpanID, "step span %s: salted span id", got.Name)
			got.TraceID, got.SpanID = base[i].TraceID, base[i].SpanID
		}
		require.Equal(t, base[i], got, "span %d (%s)", i, got.Name)
	}
	interleaved := false
	for i := 1; i < len(shared); i++ {
		if shared[i].Instance == ids[0] && shared[i-1].Instance == ids[1] {
			interleaved = true
		}
	}
	require.True(t, interleaved, "the engines' lines must interleave for this test to mean anything")

	// No two step spans of the cluster share a trace id or a span id.
	traceIDs, spanIDs := map[otlpingest.TraceID]string{}, map[otlpingest.SpanID]string{}
	firstSpans := 0
	for _, sp := range shared {
		if !strings.HasPrefix(sp.Name, otlpingest.StepSpanPrefix) {
			continue
		}
		if sp.Name == otlpingest.StepSpanPrefix+"1" {
			firstSpans++
		}
		who := sp.Instance + "/" + sp.Name
		require.NotContains(t, traceIDs, sp.TraceID, "%s has the trace id of %s", who, traceIDs[sp.TraceID])
		require.NotContains(t, spanIDs, sp.SpanID, "%s has the span id of %s", who, spanIDs[sp.SpanID])
		traceIDs[sp.TraceID], spanIDs[sp.SpanID] = who, who
	}
	require.Equal(t, 2, firstSpans, "each engine numbers its step spans from 1")

	// Ingest: each engine's steps, complete and apart; the shared KV lines
	// are all readable.
	kvPath := filepath.Join(dir, "kv.jsonl")
	require.NoError(t, os.WriteFile(kvPath, kv.buf.Bytes(), 0o644))
	out := filepath.Join(dir, "tables")
	m, err := otlpingest.Ingest(otlpingest.FileSources([]string{sharedPath, kvPath}), otlpingest.Options{OutDir: out, Workers: 2})
	require.NoError(t, err)
	dropped := results[0].Requests.Dropped + results[1].Requests.Dropped
	assert.Equal(t, map[otlpingest.IssueKind]int64{otlpingest.IssueOrphanAPISpan: dropped}, issueCounts(m),
		"no duplicate spans, no damaged KV line; only the dropped requests' API spans are alone: %+v", m.Issues.Details)
	steps := readTable(t, filepath.Join(out, otlpingest.TableSteps+".parquet"))
	perInstance := map[string]map[int64]bool{}
	for _, row := range steps {
		in := row["instance"].(string)
		if perInstance[in] == nil {
			perInstance[in] = map[int64]bool{}
		}
		id := row["step_id"].(int64)
		require.False(t, perInstance[in][id], "step %d of %s twice", id, in)
		perInstance[in][id] = true
	}
	assert.Len(t, perInstance, 2)
	for k, id := range ids {
		assert.Len(t, perInstance[id], int(stats[k].SampledSteps), "%s: every sampled step", id)
	}
	requests := readTable(t, filepath.Join(out, otlpingest.TableRequests+".parquet"))
	counts := map[string]int64{}
	for _, row := range requests {
		counts[row["instance"].(string)]++
	}
	assert.Equal(t, map[string]int64{ids[0]: results[0].Requests.Offered, ids[1]: results[1].Requests.Offered}, counts)
	kvRows := readTable(t, filepath.Join(out, otlpingest.TableKVEvents+".parquet"))
	assert.Equal(t, stats[0].KVLines+stats[1].KVLines, int64(len(strings.Split(strings.TrimSpace(kv.buf.String()), "\n"))))
	assert.NotEmpty(t, kvRows)
}

func TestInstanceSalt(t *testing.T) {
	assert.Zero(t, instanceSalt(""), "no instance: ids as without the option")
	seen := map[uint64]string{}
	for _, id := range []string{"instance_0", "instance_1", "instance_00", "a", "b", "prefill-3", "decode-3"} {
		s := instanceSalt(id)
		assert.NotZero(t, s, id)
		assert.Zero(t, s>>63, "%s: top bit clear, so that salted step span salts keep theirs", id)
		require.NotContains(t, seen, s, "%s and %s", id, seen[s])
		seen[s] = id
		for seq := int64(0); seq < 1000; seq++ {
			assert.False(t, spanID(saltStepSpan^s, seq).IsZero())
		}
	}
}
