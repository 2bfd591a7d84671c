package simtrace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/otlpingest"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// Requests whose clients give up are traced as vLLM traces an abort: the
// API span ends with api.ABORTED (reason client_disconnect) when the client
// left, and has no api.DEPARTED; a request that reached the scheduler has
// an engine span ending with journey.FINISHED, finish.status "aborted",
// when the engine applied the abort; one still in API processing has no
// engine span. Ingest reads them back as aborted requests.
func TestAbortedRequestsTrace(t *testing.T) {
	cfg := sim.Config{
		Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{
			MaxNumSeqs: 1, MaxBatchedTokens: 512, ChunkedPrefillEnabled: true,
			BlockSizeTokens: 16, TotalKVBlocksGPU: 100, PrefixCachingEnabled: true,
		}},
		// 100 µs of API overhead, 1 ms steps, no departure overhead.
		Latency: &sim.Blackbox{Alpha: [3]float64{100, 0, 0}, Beta: [3]float64{1000, 0, 0}},
		Options: sim.Options{Exhaustive: true},
	}
	dir := t.TempDir()
	r := &run{dir: dir, tracePath: filepath.Join(dir, "trace.jsonl"), kvPath: filepath.Join(dir, "kv.jsonl")}
	tf, err := os.Create(r.tracePath)
	require.NoError(t, err)
	kf, err := os.Create(r.kvPath)
	require.NoError(t, err)
	opt := DefaultOptions()
	opt.Route = RouteChatCompletions
	opt.StepSampleRate = 0
	rng := sim.NewRNG(1)
	w, err := NewWriter(tf, kf, opt, rng.Stream(sim.StreamTraceJourney), rng.Stream(sim.StreamTraceStep))
	require.NoError(t, err)
	cfg.Observer = w
	e, err := sim.NewEngine(cfg)
	require.NoError(t, err)
	// One seat: request 2 runs [100, 1100) and its client leaves at 500,
	// before its first token; request 1 waits and its client leaves at 600;
	// request 0's leaves at 120, still in API processing; request 3
	// completes.
	for _, q := range []sim.RequestSpec{
		{ID: 2, PromptTokens: 100, OutputTokens: 5},
		{ID: 1, PromptTokens: 50, OutputTokens: 2},
		{ID: 3, PromptTokens: 20, OutputTokens: 2},
		{ID: 0, ArrivalUs: 50, PromptTokens: 10, OutputTokens: 1},
	} {
		require.NoError(t, e.Inject(q, q.ArrivalUs))
	}
	for _, a := range [][2]int64{{0, 120}, {2, 500}, {1, 600}} {
		for {
			if at, ok := e.NextEventUs(); !ok || at >= a[1] {
				break
			}
			require.NoError(t, e.Advance())
		}
		ok, err := e.Abort(a[0], a[1])
		require.NoError(t, err)
		require.True(t, ok)
	}
	for {
		if _, ok := e.NextEventUs(); !ok {
			break
		}
		require.NoError(t, e.Advance())
	}
	res, err := e.Finish()
	require.NoError(t, err)
	require.Equal(t, int64(3), res.Requests.TimedOut)
	require.NoError(t, w.Close())
	require.NoError(t, tf.Close())
	require.NoError(t, kf.Close())

	data, err := os.ReadFile(r.tracePath)
	require.NoError(t, err)
	byID := map[string]otlpingest.Span{}
	for _, sp := range spansOf2(t, data) {
		id, _ := sp.Attr("gen_ai.request.id")
		byID[id.Str] = sp
	}
	require.Len(t, byID, 7, "four API spans, three engine spans")
	events := func(id int64, core bool) (names []string, atUs []int64, last *otlpingest.Event) {
		api, eng := requestIDs("chatcmpl-", id, 0)
		key := api
		if core {
			key = eng
		}
		sp, ok := byID[key]
		require.True(t, ok, "no span %s", key)
		for i := range sp.Events {
			names = append(names, sp.Events[i].Name)
			atUs = append(atUs, int64(sp.Events[i].TimeUnixNano/1000)-DefaultWallBaseNs/1000)
		}
		return names, atUs, &sp.Events[len(sp.Events)-1]
	}
	checkAborted := func(id, atUs int64) {
		names, times, last := events(id, false)
		require.Equal(t, "api.ABORTED", names[len(names)-1], "request %d", id)
		require.NotContains(t, names, "api.DEPARTED")
		require.Equal(t, atUs, times[len(times)-1])
		reason, _ := last.Attr("reason")
		assert.Equal(t, AbortReasonClient, reason.Str)
		for _, at := range times {
			assert.LessOrEqual(t, at, atUs, "request %d: the API reports nothing after its client left", id)
		}
	}
	checkFinished := func(id, atUs int64, want []string) {
		names, times, last := events(id, true)
		require.Equal(t, want, names, "request %d", id)
		require.Equal(t, atUs, times[len(times)-1])
		status, _ := last.Attr("finish.status")
		assert.Equal(t, "aborted", status.Str)
	}

	checkAborted(0, 120)
	_, eng := requestIDs("chatcmpl-", 0, 0)
	require.NotContains(t, byID, eng, "request 0 never reached the engine")
	names, _, _ := events(0, false)
	require.Equal(t, []string{"api.ARRIVED", "api.ABORTED"}, names)

	checkAborted(1, 600)
	checkFinished(1, 600, []string{"journey.QUEUED", "journey.FINISHED"})

	checkAborted(2, 500)
	names, _, _ = events(2, false)
	require.Equal(t, []string{"api.ARRIVED", "api.HANDOFF_TO_CORE", "api.ABORTED"}, names,
		"the first token, due at 1100, never reached the client")
	checkFinished(2, 1100, []string{"journey.QUEUED", "journey.SCHEDULED", "journey.FIRST_TOKEN", "journey.FINISHED"})

	names, _, _ = events(3, false)
	require.Equal(t, "api.DEPARTED", names[len(names)-1])

	// Ingest sees three aborted requests and one completed.
	_, tables := ingest(t, r)
	rows := tables[otlpingest.TableRequests]
	require.Len(t, rows, 4)
	var aborted int
	for _, row := range rows {
		if row["aborted_wall_ns"] == nil {
			assert.NotNil(t, row["departed_wall_ns"])
			continue
		}
		aborted++
		assert.Equal(t, AbortReasonClient, row["abort_reason"])
		assert.Nil(t, row["departed_wall_ns"])
		if row["core_span_id"] != nil {
			assert.Equal(t, "aborted", row["finish_status"])
		}
	}
	assert.Equal(t, 3, aborted)
}
