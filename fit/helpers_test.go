package fit

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/internal/testsupport/simtest"
	"github.com/blis-sim/blis/otlpingest"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/simtrace"
	"github.com/blis-sim/blis/sim/workload"
)

// simRun describes one simulated, traced and ingested run.
type simRun struct {
	knobs    physics.VLLMKnobs
	latency  func(*physics.PhysicsConfig) sim.LatencyModel
	noise    float64
	requests int
	rate     float64
	prompt   string
	output   string
	trace    simtrace.Options
	seed     int64
	cpuBlock int64
	offload  float64
	// prefixGroups > 0 gives half the requests one of that many 256-token prefixes.
	prefixGroups int
	// reqs, when set, is the workload (instead of generating one).
	reqs []sim.RequestSpec
	// sync turns vLLM's async scheduling off.
	sync bool
}

// pipeline is vLLM's async scheduling unless sync; no output delay, so
// that FINISHED → DEPARTED is the departure overhead alone.
func (r simRun) pipeline() sim.Pipeline {
	if r.sync {
		return sim.Pipeline{}
	}
	return sim.Pipeline{AsyncDepth: 1}
}

func defaultSimRun() simRun {
	k := physics.DefaultVLLMKnobs()
	k.MaxNumSeqs = 64
	k.MaxBatchedTokens = 4096
	k.TotalKVBlocksGPU = 4000
	tr := simtrace.DefaultOptions()
	tr.StepSampleRate, tr.RichSubsampleRate = 1, 1
	tr.MaxEventsPerSpan = 1 << 20 // as with a raised OTEL_SPAN_EVENT_COUNT_LIMIT: nothing lost
	return simRun{
		knobs:    k,
		latency:  func(c *physics.PhysicsConfig) sim.LatencyModel { return sim.DefaultRoofline(c) },
		requests: 600, rate: 20,
		prompt: "lognormal:mean=600,cv=0.7,max=4000", output: "lognormal:mean=120,cv=0.8,max=600",
		trace: tr, seed: 7,
	}
}

// simulate runs r on Llama-3.1-8B / H100, writes its trace (and KV events),
// ingests them into dir and returns the configuration.
func simulate(t testing.TB, dir string, r simRun) *physics.PhysicsConfig {
	c, _ := simulateResult(t, dir, r)
	return c
}

// workloadOf generates r's workload.
func workloadOf(t testing.TB, r simRun) []sim.RequestSpec {
	spec := workload.Spec{Requests: r.requests, Rate: r.rate, PrefixGroups: r.prefixGroups, PrefixTokens: 256, PrefixFraction: 0.5}
	var err error
	spec.Prompt, err = workload.ParseDist(r.prompt)
	require.NoError(t, err)
	spec.Output, err = workload.ParseDist(r.output)
	require.NoError(t, err)
	reqs, err := workload.Generate(spec, sim.NewRNG(r.seed).Stream(sim.StreamWorkload))
	require.NoError(t, err)
	return reqs
}

// simulateResult is simulate that also returns the run's metrics; with an
// empty dir it writes no trace.
func simulateResult(t testing.TB, dir string, r simRun) (*physics.PhysicsConfig, *sim.Result) {
	t.Helper()
	m, err := physics.LoadModel("llama-3.1-8b")
	require.NoError(t, err)
	h, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	k := r.knobs
	if r.cpuBlock > 0 {
		k.CPUOffloading, k.TotalKVBlocksCPU = true, r.cpuBlock
	}
	c, err := physics.NewPhysicsConfig(m, h, 1, k)
	require.NoError(t, err)
	rng := sim.NewRNG(r.seed)
	reqs := r.reqs
	if reqs == nil {
		reqs = workloadOf(t, r)
	}
	lat := r.latency(c)
	if r.noise > 0 {
		lat = sim.NewNoisy(lat, r.noise, rng.Stream(sim.StreamLatencyNoise))
	}
	offload := r.offload
	if offload == 0 {
		offload = 0.8
	}
	cfg := sim.Config{Engine: sim.EngineConfig{VLLMKnobs: k, OffloadThreshold: offload, Pipeline: r.pipeline()}, Latency: lat}
	if dir == "" {
		s, err := sim.New(cfg, reqs)
		require.NoError(t, err)
		res, err := s.Run()
		require.NoError(t, err)
		return c, res
	}
	tracePath, kvPath := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "kv.jsonl")
	tf, err := os.Create(tracePath)
	require.NoError(t, err)
	kf, err := os.Create(kvPath)
	require.NoError(t, err)
	tb, kb := bufio.NewWriter(tf), bufio.NewWriter(kf)
	r.trace.Model = m.Name
	tw, err := simtrace.NewWriter(tb, kb, r.trace, rng.Stream(sim.StreamTraceJourney), rng.Stream(sim.StreamTraceStep))
	require.NoError(t, err)
	cfg.Observer = tw
	s, err := sim.New(cfg, reqs)
	require.NoError(t, err)
	res, err := s.Run()
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, tb.Flush())
	require.NoError(t, kb.Flush())
	require.NoError(t, tf.Close())
	require.NoError(t, kf.Close())
	files := []string{tracePath}
	if r.cpuBlock > 0 {
		files = append(files, kvPath)
	}
	_, err = otlpingest.Ingest(otlpingest.FileSources(files), otlpingest.Options{OutDir: filepath.Join(dir, "tables")})
	require.NoError(t, err)
	return c, res
}

// simulateEngines runs one engine per run on one clock, as a cluster does
// (the earliest next event first, the lowest index on ties), each traced
// by a Writer with its instance id into one trace file, and ingests it
// into dir/tables. Request ids must be unique across the engines (give
// runs their reqs). The runs share runs[0]'s configuration.
func simulateEngines(t testing.TB, dir string, runs []simRun, ids []string) *physics.PhysicsConfig {
	t.Helper()
	m, err := physics.LoadModel("llama-3.1-8b")
	require.NoError(t, err)
	h, err := physics.LoadHardware("h100-sxm")
	require.NoError(t, err)
	c, err := physics.NewPhysicsConfig(m, h, 1, runs[0].knobs)
	require.NoError(t, err)
	tracePath := filepath.Join(dir, "trace.jsonl")
	tf, err := os.Create(tracePath)
	require.NoError(t, err)
	tb := bufio.NewWriter(tf)
	engines := make([]*sim.Engine, len(runs))
	writers := make([]*simtrace.Writer, len(runs))
	reqs := make([][]sim.RequestSpec, len(runs))
	for k, r := range runs {
		rng := sim.NewRNG(r.seed)
		opt := r.trace
		opt.Model, opt.InstanceID = m.Name, ids[k]
		writers[k], err = simtrace.NewWriter(tb, nil, opt, rng.Stream(sim.StreamTraceJourney), rng.Stream(sim.StreamTraceStep))
		require.NoError(t, err)
		cfg := sim.Config{Engine: sim.EngineConfig{VLLMKnobs: r.knobs, OffloadThreshold: 0.8, Pipeline: r.pipeline()},
			Latency: r.latency(c), Observer: writers[k]}
		engines[k], err = sim.NewEngine(cfg)
		require.NoError(t, err)
		if reqs[k] = r.reqs; reqs[k] == nil {
			reqs[k] = workloadOf(t, r)
		}
	}
	require.NoError(t, simtest.Interleave(engines, reqs))
	for k, e := range engines {
		_, err := e.Finish()
		require.NoError(t, err)
		require.NoError(t, writers[k].Close())
	}
	require.NoError(t, tb.Flush())
	require.NoError(t, tf.Close())
	_, err = otlpingest.Ingest(otlpingest.FileSources([]string{tracePath}), otlpingest.Options{OutDir: filepath.Join(dir, "tables")})
	require.NoError(t, err)
	return c
}
