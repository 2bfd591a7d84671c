package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/blis-sim/blis/internal/clip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster/disagg"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// TestPDBackpressureIsCounted: the decode instance with room for one
// prompt's KV makes the second request's pull wait for blocks: one P/D
// backpressure event, with the request, the decode instance and the time
// of the pull; with room for both, none. A run without disaggregation
// says the counter cannot fire.
func TestPDBackpressureIsCounted(t *testing.T) {
	two := []sim.RequestSpec{{ID: 0, PromptTokens: 2000, OutputTokens: 3}, {ID: 1, PromptTokens: 2000, OutputTokens: 3}}
	cfg, _ := pdRig(1, 1, 150, disagg.Always{})
	res := runPD(t, cfg, two)
	bp := res.Anomalies.PDBackpressure
	require.Equal(t, res.Disaggregation.PullsWaited, bp.Count)
	require.Equal(t, int64(1), bp.Count)
	require.Empty(t, bp.Note)
	require.Len(t, bp.Examples, 1)
	ex := bp.Examples[0]
	require.Equal(t, "instance_1", ex.Instance)
	require.Equal(t, []int64{1}, ex.Requests)
	require.Greater(t, ex.AtUs, res.PerRequest[0].TTFT, "pulled once the first request freed its blocks")
	require.Contains(t, ex.Detail, "waited")

	cfg, _ = pdRig(1, 1, 1000, disagg.Always{})
	res = runPD(t, cfg, two)
	require.Zero(t, res.Anomalies.PDBackpressure.Count)

	c, err := New(Config{Instances: []Instance{{ID: "a", Config: scaleEngine()}}}, NewSliceSource(two))
	require.NoError(t, err)
	res, err = c.Run()
	require.NoError(t, err)
	require.Contains(t, res.Anomalies.PDBackpressure.Note, "no prefill/decode disaggregation")
	require.Contains(t, res.Anomalies.ScaleOscillation.Note, "no autoscaler")
}

// TestParseSample: the forms of --counterfactual-sample, and errors that
// say what is expected.
func TestParseSample(t *testing.T) {
	for _, c := range []struct {
		in    string
		every int64
		rate  float64
		on    bool
		err   string
	}{
		{in: ""}, {in: "0"}, {in: "  0 "},
		{in: "every:1", every: 1, on: true},
		{in: " every:50 ", every: 50, on: true},
		{in: "every: 7", every: 7, on: true},
		{in: "1", rate: 1, on: true},
		{in: "0.05", rate: 0.05, on: true},
		{in: "1e-3", rate: 0.001, on: true},
		{in: "every:0", err: `"every:0": every:N needs a whole number N >= 1 of decisions`},
		{in: "every:-3", err: "every:N needs a whole number N >= 1"},
		{in: "every:1.5", err: "every:N needs a whole number N >= 1"},
		{in: "every:", err: "every:N needs a whole number N >= 1"},
		{in: "every", err: `"every" is neither a rate in (0, 1] nor every:N (every N-th decision)`},
		{in: "2", err: `"2" is neither a rate in (0, 1]`},
		{in: "-0.1", err: "is neither a rate in (0, 1]"},
		{in: "NaN", err: "is neither a rate in (0, 1]"},
		{in: "Inf", err: "is neither a rate in (0, 1]"},
		{in: "5%", err: "is neither a rate in (0, 1]"},
		{in: "0.0", err: "is neither a rate in (0, 1]"},
	} {
		cf, on, err := ParseSample(c.in)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, "%q", c.in)
			require.False(t, on)
			continue
		}
		require.NoError(t, err, "%q", c.in)
		require.Equal(t, c.on, on, "%q", c.in)
		require.Equal(t, c.every, cf.EveryN, "%q", c.in)
		require.Equal(t, c.rate, cf.Rate, "%q", c.in)
		if on {
			back, on2, err := ParseSample(cf.Label())
			require.NoError(t, err)
			require.True(t, on2)
			require.Equal(t, cf, back, "Label reads back")
		}
	}
}

// FuzzParseSample: any text either parses to a valid sampling that its
// label reads back to, is off, or is an error that quotes it.
func FuzzParseSample(f *testing.F) {
	for _, s := range []string{"", "0", "every:3", "0.5", "1", "every:x", "1e400", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cf, on, err := ParseSample(s)
		switch {
		case err != nil:
			if on || !strings.Contains(err.Error(), fmt.Sprintf("%q", clip.String(s))) {
				t.Fatalf("ParseSample(%q): on %v, error %v", s, on, err)
			}
		case on:
			if cf.EveryN == 0 {
				cf.RNG = sim.NewRNG(1).Stream(sim.StreamCounterfactual)
			}
			if err := cf.validate(); err != nil {
				t.Fatalf("ParseSample(%q) = %+v, invalid: %v", s, cf, err)
			}
			cf.RNG = nil
			back, _, err := ParseSample(cf.Label())
			if err != nil || back != cf {
				t.Fatalf("ParseSample(%q) = %+v; its label %q reads %+v, %v", s, cf, cf.Label(), back, err)
			}
		}
	})
}

// pdRows are docs/anomalies.md's P/D backpressure rows: 2 prefill and 2
// decode instances (pdRig: a 1 ms step, 8 requests per batch) serving
// 400 requests of 500 to 2,000 prompt tokens every 12 ms (the network moves about 120 such prompts a second into the two decode instances), the decode
// instances with room for the KV of 40 such prompts (4,000 blocks, the
// baseline) or of 3 (400 blocks, starved).
var pdRows = []struct {
	label    string
	kv       int64
	baseline bool
}{
	{"baseline: 4,000 KV blocks per decode instance", 4000, true},
	{"decode-starved: 400 KV blocks per decode instance", 400, false},
}

func pdRowRun(t *testing.T, kv int64) *Result {
	cfg, _ := pdRig(2, 2, kv, disagg.Always{})
	cfg.Decisions = nil
	var reqs []sim.RequestSpec
	for k := int64(0); k < 400; k++ {
		reqs = append(reqs, sim.RequestSpec{ID: k, ArrivalUs: 12000 * k, PromptTokens: 500 + (k*389)%1501, OutputTokens: 10 + k%21})
	}
	return runPD(t, cfg, reqs)
}

// TestPDBackpressureDocs: docs/anomalies.md's P/D rows are what the
// project measures (go test ./cluster -run PDBackpressureDocs -update);
// the baseline reads 0, the starved decode pool far above it.
func TestPDBackpressureDocs(t *testing.T) {
	var b strings.Builder
	b.WriteString("| deployment | P/D backpressure (pulls that waited) | transfers | pull wait p99 (ms) | other counters | TTFT p99 (ms) |\n|---|---|---|---|---|---|\n")
	var counts []int64
	for _, row := range pdRows {
		res := pdRowRun(t, row.kv)
		a := res.Anomalies
		var others int64
		for _, c := range a.Counters() {
			if c.Name != "pd_backpressure" {
				others += c.Count
			}
		}
		counts = append(counts, a.PDBackpressure.Count)
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f | %d | %.1f |\n", row.label, a.PDBackpressure.Count, res.Disaggregation.Transfers,
			res.Disaggregation.PullWaitMs.P99, others, res.TTFT.P99)
	}
	require.Zero(t, counts[0], "the baseline")
	require.True(t, counts[1] >= 20 && counts[1] >= 10*(counts[0]+1), "starved: %d", counts[1])
	doc := filepath.Join("..", "docs", "anomalies.md")
	const begin, end = "<!-- pd-table -->\n", "<!-- /pd-table -->\n"
	data, err := os.ReadFile(doc)
	require.NoError(t, err)
	s := string(data)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	require.True(t, i >= 0 && j > i, "%s has no pd-table markers", doc)
	want := s[:i+len(begin)] + b.String() + s[j:]
	if *update {
		require.NoError(t, os.WriteFile(doc, []byte(want), 0o644))
		return
	}
	require.Equal(t, want, s, "%s's P/D table is stale: go test ./cluster -run PDBackpressureDocs -update", doc)
}

// TestDetailedTraceGolden freezes the detailed decision trace
// (testdata/detailed.golden.jsonl; go test ./cluster -run
// DetailedTraceGolden -update rewrites it): two instances with a small
// GPU cache and a CPU tier, so that the trace has batch, preemption,
// kv_transfer (offload and reload) and counterfactual records beside the
// admission and routing ones; every line is JSON with t_us, type and,
// for the instances' records, instance.
func TestDetailedTraceGolden(t *testing.T) {
	var buf bytes.Buffer
	var ins []Instance
	for i := 0; i < 2; i++ {
		ins = append(ins, Instance{ID: InstanceID(i, 2), Config: sim.Config{
			Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{MaxNumSeqs: 8, MaxBatchedTokens: 512, ChunkedPrefillEnabled: true,
				BlockSizeTokens: 16, TotalKVBlocksGPU: 48, TotalKVBlocksCPU: 200, CPUOffloading: true, PrefixCachingEnabled: true}, OffloadThreshold: 0.2},
			Latency: constLatency{step: 1000, arrive: 100, depart: 50},
		}})
	}
	var reqs []sim.RequestSpec
	for i := int64(0); i < 16; i++ {
		reqs = append(reqs, sim.RequestSpec{ID: i, ArrivalUs: i * 400, PromptTokens: 96 + 16*(i%4), OutputTokens: 20 + i%7, PrefixGroup: int32(1 + i%3), PrefixTokens: 64})
	}
	c, err := New(Config{Instances: ins, Decisions: &buf, TraceDetailed: true, CounterfactualK: 1, Counterfactual: &Counterfactual{EveryN: 4}}, NewSliceSource(reqs))
	require.NoError(t, err)
	res, err := c.Run()
	require.NoError(t, err)
	const golden = "testdata/detailed.golden.jsonl"
	if *update {
		require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), buf.String(), "regenerate with go test ./cluster -run DetailedTraceGolden -update")
	types := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		require.Contains(t, m, "t_us")
		typ := m["type"].(string)
		types[typ]++
		if typ != "admission" && typ != "routing" && typ != "counterfactual" {
			require.Contains(t, m, "instance", line)
		}
	}
	for _, typ := range []string{"admission", "routing", "batch", "preemption", "kv_transfer", "counterfactual"} {
		require.Positive(t, types[typ], "%s records: %v", typ, types)
	}
	require.Equal(t, int(res.Preemptions), types["preemption"])
	require.Equal(t, int64(4), res.Counterfactual.Sampled)
}

// CloneLatency: constLatency has no state, so a clone shares it.
func (m constLatency) CloneLatency() (sim.LatencyModel, error) { return m, nil }

// TestCounterfactualRefusesDisaggregation: sampled decisions are not
// simulated through a prefill/decode split.
func TestCounterfactualRefusesDisaggregation(t *testing.T) {
	cfg, _ := pdRig(1, 1, 1000, disagg.Always{})
	cfg.Counterfactual = &Counterfactual{EveryN: 1}
	_, err := New(*cfg, NewSliceSource(nil))
	require.ErrorContains(t, err, "counterfactual: not available with prefill/decode disaggregation")
}
