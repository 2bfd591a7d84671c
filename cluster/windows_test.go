package cluster_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// checkWindowGrid: the rows are consecutive windows of d µs aligned at 0.
func checkWindowGrid(t *testing.T, rows []cluster.Window, d int64) {
	t.Helper()
	require.NotEmpty(t, rows)
	for k, w := range rows {
		require.Zero(t, w.StartUs%d, "row %d starts on a multiple of the window", k)
		require.Equal(t, w.StartUs+d, w.EndUs, "row %d", k)
		if k > 0 {
			require.Equal(t, rows[k-1].EndUs, w.StartUs, "row %d follows row %d", k, k-1)
		}
	}
}

// TestWindowsAddUpToTheRunTotals recounts every window of random clusters
// (rejections, drops, preemptions, latencies, horizons) from the per-request
// records: arrivals by arrival time, departures and their tokens and TTFT
// percentiles by departure time; without a horizon the rows add up to the
// run's totals.
func TestWindowsAddUpToTheRunTotals(t *testing.T) {
	var horizons, rejects, drops int
	for seed := uint64(1); seed <= 16; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			cfg, reqs := randomCluster(t, seed)
			d := []int64{1000, 7000, 50_000, 1_000_000}[seed%4]
			cfg.WindowUs = d
			c, err := cluster.New(cfg, cluster.NewSliceSource(reqs))
			require.NoError(t, err)
			res, err := c.Run()
			require.NoError(t, err)
			rows := res.Windows
			checkWindowGrid(t, rows, d)
			require.Equal(t, reqs[0].ArrivalUs/d*d, rows[0].StartUs, "the first row holds the first arrival")

			// Recount: window k is [rows[0].StartUs + k·d, ...).
			end := int64(math.MaxInt64)
			if cfg.HorizonUs > 0 {
				end = cfg.HorizonUs
				horizons++
			}
			want := make([]cluster.Window, len(rows))
			at := func(us int64) *cluster.Window {
				k := (us - rows[0].StartUs) / d
				require.Less(t, k, int64(len(rows)), "an event at %d µs lies past the last row", us)
				return &want[k]
			}
			for _, r := range reqs {
				if r.ArrivalUs <= end {
					at(r.ArrivalUs).Arrived++
				}
			}
			ttft := make([]sim.Histogram, len(rows))
			for _, r := range res.PerRequest {
				switch {
				case r.Outcome == "rejected":
					at(r.ArrivalUs).Rejected++
				case r.DepartedUs > end: // finished, not yet departed at the horizon
				case r.Outcome == "dropped":
					at(r.DepartedUs).Dropped++
				case r.Outcome == "timed_out":
					at(r.DepartedUs).TimedOut++
				case r.Outcome == "completed":
					w := at(r.DepartedUs)
					w.Completed++
					w.OutputTokens += r.OutputTokens
					ttft[(r.DepartedUs-rows[0].StartUs)/d].Add(r.TTFT)
				}
			}
			var inSystem int64
			for k := range rows {
				g, w := rows[k], &want[k]
				w.Admitted = w.Arrived - w.Rejected
				// Admitted before the end and not left before it.
				inSystem += w.Admitted - w.Completed - w.Dropped - w.TimedOut
				if cfg.HorizonUs == 0 || g.EndUs <= cfg.HorizonUs {
					require.Equal(t, inSystem, g.InSystem, "in_system at %d µs", g.EndUs)
				}
				if ttft[k].Count() > 0 {
					w.TTFTP50Us, w.TTFTP99Us = ttft[k].Quantile(0.5), ttft[k].Quantile(0.99)
				}
				require.Equal(t, [9]int64{w.Arrived, w.Admitted, w.Rejected, w.Completed, w.Dropped, w.TimedOut, w.OutputTokens, w.TTFTP50Us, w.TTFTP99Us},
					[9]int64{g.Arrived, g.Admitted, g.Rejected, g.Completed, g.Dropped, g.TimedOut, g.OutputTokens, g.TTFTP50Us, g.TTFTP99Us}, "window [%d,%d)", g.StartUs, g.EndUs)
				require.True(t, g.KVUtilMean <= g.KVUtilMax && g.KVUtilMax <= 1)
			}

			var sum cluster.Window
			for _, w := range rows {
				sum.Arrived += w.Arrived
				sum.Admitted += w.Admitted
				sum.Rejected += w.Rejected
				sum.Completed += w.Completed
				sum.Dropped += w.Dropped
				sum.TimedOut += w.TimedOut
				sum.OutputTokens += w.OutputTokens
				sum.PromptTokens += w.PromptTokens
				sum.GenerationTokens += w.GenerationTokens
			}
			// vLLM's token counters: every token generated, and every
			// prompt that produced a first token, once.
			var prompts int64
			for _, r := range res.PerRequest {
				if r.Outcome == "completed" {
					prompts += r.PromptTokens
				}
			}
			q := res.Requests
			require.Equal(t, [3]int64{q.Arrived, q.Admitted, q.Rejected}, [3]int64{sum.Arrived, sum.Admitted, sum.Rejected})
			require.Equal(t, q.DroppedUnservable, sum.Dropped)
			rejects += int(q.Rejected)
			drops += int(q.DroppedUnservable)
			last := rows[len(rows)-1]
			if cfg.HorizonUs == 0 {
				require.Zero(t, last.InSystem, "a run that served everything ends empty")
				require.Equal(t, q.Completed, sum.Completed)
				require.Equal(t, q.TimedOut, sum.TimedOut)
				require.Equal(t, res.OutputTokens, sum.GenerationTokens)
				if q.TimedOut == 0 {
					require.Equal(t, prompts, sum.PromptTokens)
					require.Equal(t, res.OutputTokens, sum.OutputTokens)
				} else {
					// The run's output tokens include those generated for
					// requests that then timed out; windows count
					// completed requests' tokens.
					require.LessOrEqual(t, sum.OutputTokens, res.OutputTokens)
				}
				require.Equal(t, [3]int64{0, 0, 0}, [3]int64{last.QueueDepth, last.Running, last.InFlight}, "the last row's state is the final, empty one")
				var lastDeparture int64
				for _, r := range res.PerRequest {
					lastDeparture = max(lastDeparture, r.DepartedUs)
				}
				require.True(t, last.StartUs <= lastDeparture && lastDeparture < last.EndUs, "the last row holds the last departure")
			} else {
				require.LessOrEqual(t, sum.Completed, q.Completed)
				require.LessOrEqual(t, sum.GenerationTokens, res.OutputTokens)
			}
		})
	}
	require.Greater(t, horizons, 0, "some runs stop at a horizon")
	require.Greater(t, rejects, 0, "some requests are rejected")
	require.Greater(t, drops, 0, "some requests are dropped")

	// Without windows there are none.
	cfg, reqs := randomCluster(t, 1)
	c, err := cluster.New(cfg, cluster.NewSliceSource(reqs))
	require.NoError(t, err)
	res, err := c.Run()
	require.NoError(t, err)
	require.Nil(t, res.Windows)
}

// constCluster is n instances of constant timing: 1000 µs steps, 100 µs
// from arrival to queue, no departure overhead; 8 requests at most per
// instance and 400 KV blocks, so that queues form.
func constCluster(t *testing.T, n int, policy string) cluster.Config {
	var ins []cluster.Instance
	for i := 0; i < n; i++ {
		ins = append(ins, cluster.Instance{ID: cluster.InstanceID(i, n), Config: sim.Config{
			Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{MaxNumSeqs: 8, MaxBatchedTokens: 512, ChunkedPrefillEnabled: true,
				BlockSizeTokens: 16, TotalKVBlocksGPU: 400, PrefixCachingEnabled: true}},
			Latency: &sim.Blackbox{Alpha: [3]float64{100, 0, 0}, Beta: [3]float64{1000, 0, 0}},
		}})
	}
	r, err := route.New(policy, n, route.Params{})
	require.NoError(t, err)
	return cluster.Config{Instances: ins, Routing: r}
}

// TestWindowSamplesAreTheStatusAtTheirEnds drives a cluster step by step
// and reads, through the public status of every instance and the router's
// in-flight counts, the state when the clock is about to reach or pass
// each window's end; the rows hold exactly that state. Arrivals and steps
// fall on window ends (multiples of 500 and 1000 µs against 2000 µs
// windows), so a sample taken after the events at an end, or before those
// just before it, would differ.
func TestWindowSamplesAreTheStatusAtTheirEnds(t *testing.T) {
	const d = 2000
	cfg := constCluster(t, 3, route.LeastLoadedName)
	cfg.WindowUs = d
	cfg.RoutingLatencyUs = 300
	var reqs []sim.RequestSpec
	for i := 0; i < 150; i++ {
		reqs = append(reqs, sim.RequestSpec{ID: int64(i), ArrivalUs: int64(i/3) * 500, PromptTokens: int64(50 + 37*(i%11)), OutputTokens: int64(1 + i%9)})
	}
	c, err := cluster.New(cfg, cluster.NewSliceSource(reqs))
	require.NoError(t, err)
	sample := func() cluster.Window {
		var w cluster.Window
		var kv float64
		for i := 0; i < c.NumInstances(); i++ {
			st := c.InstanceStatus(i)
			w.QueueDepth += st.QueueDepth
			w.Running += st.BatchSize
			w.InFlight += c.InFlight(i)
			kv += st.KVUtilization
			w.KVUtilMax = max(w.KVUtilMax, st.KVUtilization)
		}
		w.KVUtilMean = kv / float64(c.NumInstances())
		return w
	}
	var want []cluster.Window
	var onEnd int
	next := int64(d) // the first arrival is at 0: the first window ends at d
	for {
		at, ok := c.NextEventUs()
		if !ok {
			break
		}
		if at == next {
			onEnd++
		}
		for ; next <= at; next += d {
			want = append(want, sample())
		}
		require.NoError(t, c.Step())
	}
	want = append(want, sample()) // the last window: the final state
	require.Greater(t, onEnd, 10, "events fall on window ends")
	res, err := c.Finish()
	require.NoError(t, err)
	require.Len(t, res.Windows, len(want))
	var busy int
	for k, g := range res.Windows {
		w := want[k]
		require.Equal(t, [3]int64{w.QueueDepth, w.Running, w.InFlight}, [3]int64{g.QueueDepth, g.Running, g.InFlight}, "window [%d,%d)", g.StartUs, g.EndUs)
		require.Equal(t, [2]float64{w.KVUtilMean, w.KVUtilMax}, [2]float64{g.KVUtilMean, g.KVUtilMax}, "window [%d,%d)", g.StartUs, g.EndUs)
		if g.QueueDepth > 0 {
			busy++
		}
	}
	require.Greater(t, busy, 3, "queues form")
}

// TestWindowsAreTheSameForAnyWorkers: workers advance instances between
// cluster events, and a window's end is such an event, so the rows (and
// the files written from them) are identical for one and two workers.
func TestWindowsAreTheSameForAnyWorkers(t *testing.T) {
	prev := runtime.GOMAXPROCS(2) // workers need two Ps
	defer runtime.GOMAXPROCS(prev)
	spec := deploy.DefaultInstanceSpec()
	spec.Latency.Model = "roofline"
	spec.VLLM.TotalKVBlocksGPU = 3000
	d, err := deploy.Uniform(spec, 4)
	require.NoError(t, err)
	reqs := defaultWorkload(t, 600, 40, 11, 8000)
	run := func(workers int) ([]cluster.Window, string) {
		b, err := d.Build(sim.NewRNG(2))
		require.NoError(t, err)
		b.Config.Workers = workers
		b.Config.WindowUs = 150_000
		c, err := cluster.New(b.Config, cluster.NewSliceSource(reqs))
		require.NoError(t, err)
		res, err := c.Run()
		require.NoError(t, err)
		var csv bytes.Buffer
		require.NoError(t, cluster.WriteWindowsCSV(&csv, res.Windows))
		return res.Windows, csv.String()
	}
	one, oneCSV := run(1)
	two, twoCSV := run(2)
	require.Greater(t, len(one), 50)
	var queued int
	for _, w := range one {
		if w.QueueDepth > 0 {
			queued++
		}
	}
	require.Greater(t, queued, 0, "the load makes queues")
	require.Equal(t, one, two)
	require.Equal(t, oneCSV, twoCSV)
}

// TestWindowFilesParseBack writes rows as CSV and JSON lines and reads
// them back: the header and keys are WindowColumns in order, the values
// the rows', rates per second of the window, TTFT empty or null where no
// request completed.
func TestWindowFilesParseBack(t *testing.T) {
	rows := []cluster.Window{
		{StartUs: 0, EndUs: 500_000, Arrived: 7, Admitted: 6, Rejected: 1, QueueDepth: 3, Running: 4, KVUtilMean: 0.25, KVUtilMax: 0.5, InFlight: 7,
			PromptTokens: 4096, GenerationTokens: 17, ReplicasReady: 2, Cost: 0.5, InSystem: 13, Warmup: true},
		{StartUs: 500_000, EndUs: 1_000_000, Arrived: 2, Admitted: 2, Completed: 5, Dropped: 1, OutputTokens: 1234, TTFTP50Us: 12_345, TTFTP99Us: 98_765,
			Running: 1, KVUtilMean: 1.0 / 3, KVUtilMax: 0.1, InFlight: 1, GenerationTokens: 300, Killed: 2, ReplicasReady: 1, ReplicasStarting: 3,
			ReplicasDraining: 1, Cost: 0.25, InSystem: 7},
	}
	cols := cluster.WindowColumns()
	require.Equal(t, []string{"start_us", "end_us", "arrived", "admitted", "rejected", "completed", "dropped", "timed_out", "output_tokens",
		"arrived_per_s", "completed_per_s", "output_tokens_per_s", "ttft_p50_ms", "ttft_p99_ms",
		"queue_depth", "running", "kv_utilization_mean", "kv_utilization_max", "in_flight", "prompt_tokens", "generation_tokens",
		"killed", "replicas_ready", "replicas_starting", "replicas_draining", "cost", "in_system", "warmup"}, cols)
	// The values each row must read back as, by column.
	want := []map[string]string{
		{"start_us": "0", "end_us": "500000", "arrived": "7", "admitted": "6", "rejected": "1", "completed": "0", "dropped": "0", "timed_out": "0",
			"output_tokens": "0", "arrived_per_s": "14", "completed_per_s": "0", "output_tokens_per_s": "0", "ttft_p50_ms": "", "ttft_p99_ms": "",
			"queue_depth": "3", "running": "4", "kv_utilization_mean": "0.25", "kv_utilization_max": "0.5", "in_flight": "7",
			"prompt_tokens": "4096", "generation_tokens": "17", "killed": "0", "replicas_ready": "2", "replicas_starting": "0", "replicas_draining": "0", "cost": "0.5",
			"in_system": "13", "warmup": "1"},
		{"start_us": "500000", "end_us": "1000000", "arrived": "2", "admitted": "2", "rejected": "0", "completed": "5", "dropped": "1", "timed_out": "0",
			"output_tokens": "1234", "arrived_per_s": "4", "completed_per_s": "10", "output_tokens_per_s": "2468", "ttft_p50_ms": "12.345", "ttft_p99_ms": "98.765",
			"queue_depth": "0", "running": "1", "kv_utilization_mean": "0.3333333333333333", "kv_utilization_max": "0.1", "in_flight": "1",
			"prompt_tokens": "0", "generation_tokens": "300", "killed": "2", "replicas_ready": "1", "replicas_starting": "3", "replicas_draining": "1", "cost": "0.25",
			"in_system": "7", "warmup": "0"},
	}

	var cb bytes.Buffer
	require.NoError(t, cluster.WriteWindowsCSV(&cb, rows))
	recs, err := csv.NewReader(&cb).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 1+len(rows))
	require.Equal(t, cols, recs[0])
	for k, rec := range recs[1:] {
		for i, v := range rec {
			require.Equal(t, want[k][cols[i]], v, "row %d, %s", k, cols[i])
		}
	}

	var jb bytes.Buffer
	require.NoError(t, cluster.WriteWindowsJSONL(&jb, rows))
	lines := strings.Split(strings.TrimSuffix(jb.String(), "\n"), "\n")
	require.Len(t, lines, len(rows))
	for k, line := range lines {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		tok, err := dec.Token()
		require.NoError(t, err)
		require.Equal(t, json.Delim('{'), tok)
		var keys []string
		for dec.More() {
			key, err := dec.Token()
			require.NoError(t, err)
			var v any
			require.NoError(t, dec.Decode(&v))
			keys = append(keys, key.(string))
			got := ""
			if v != nil {
				got = string(v.(json.Number))
			}
			require.Equal(t, want[k][key.(string)], got, "row %d, %s", k, key)
		}
		require.Equal(t, cols, keys, "the keys in column order")
		m, err := json.Marshal(rows[k])
		require.NoError(t, err)
		require.Equal(t, line, string(m), "a window's JSON is its line")
		// The values are plain JSON numbers (or null) a float parser reads.
		var parsed map[string]*float64
		require.NoError(t, json.Unmarshal([]byte(line), &parsed))
		for _, c := range cols {
			if w := want[k][c]; w != "" {
				f, err := strconv.ParseFloat(w, 64)
				require.NoError(t, err)
				require.Equal(t, f, *parsed[c])
			} else {
				require.Nil(t, parsed[c])
			}
		}
	}

	cb.Reset()
	require.NoError(t, cluster.WriteWindowsCSV(&cb, nil))
	require.Equal(t, strings.Join(cols, ",")+"\n", cb.String(), "no rows: the header")
}

// TestWindowLimits: a negative window is refused; a run that would need
// more than a million windows fails with ErrTooManyWindows before it
// allocates them.
func TestWindowLimits(t *testing.T) {
	cfg := constCluster(t, 1, route.RoundRobinName)
	cfg.WindowUs = -1
	_, err := cluster.New(cfg, cluster.NewSliceSource(nil))
	require.ErrorContains(t, err, "time window must be >= 0 µs")

	cfg.WindowUs = 2
	reqs := []sim.RequestSpec{{ID: 0, ArrivalUs: 0, PromptTokens: 10, OutputTokens: 1}, {ID: 1, ArrivalUs: 3_000_000, PromptTokens: 10, OutputTokens: 1}}
	c, err := cluster.New(cfg, cluster.NewSliceSource(reqs))
	require.NoError(t, err)
	_, err = c.Run()
	require.True(t, errors.Is(err, cluster.ErrTooManyWindows), "%v", err)
	require.ErrorContains(t, err, "use a longer window")
}
