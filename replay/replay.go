// Package replay is blis validate as a library: it replays the requests
// of a measured vLLM run (their arrivals, prompt and output lengths)
// through the simulator on the deployment the run records, and compares
// each request's simulated TTFT, ITL and E2E with the measured ones
// (package validate), and the engine's counters phase by phase when the
// run has them. With Options.Calibrate it first fits the roofline's
// step-time parameters and the output delay to the run by a deterministic
// search over simulations (validate.Search).
//
// The input is a Measured run: ReadRecords reads the per-request files
// users have (vllm-runs with its meta.json and timeseries.csv, vllm bench
// serve results, inference-perf); a reader of another source fills the
// same struct. Run applies what the run records of its deployment to the
// experiment draft under the flags the user gave, replays, and returns a
// Report that prints as a table (WriteText) or JSON, draws its plot
// (WritePlot) and writes a host profile (HostProfile).
//
// Everything is deterministic: the same Measured, draft and options give
// the same Report (but its wall times).
package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload/records"
	"github.com/blis-sim/blis/validate"
)

// Options change what Run does besides the comparison.
type Options struct {
	// Calibrate fits the simulator to the run before comparing
	// (calibrate.go).
	Calibrate bool
}

// Report is a replay's outcome; its JSON is blis validate --json's.
type Report struct {
	Tool       string                  `json:"tool"`
	Version    int                     `json:"version"`
	Records    records.Report          `json:"records"`
	MeasuredAt string                  `json:"measured_at"`
	Meta       string                  `json:"meta,omitempty"`
	Deployment experiment.InstanceEcho `json:"deployment"`
	Engines    int                     `json:"engines"`
	// Lockstep sums the engines' data-parallel lockstep (a MoE model's
	// DP engines), absent without it.
	Lockstep *sim.LockstepResult `json:"lockstep,omitempty"`
	Compare  validate.Report     `json:"compare"`
	// ComparedOnly says which requests were compared when not all were
	// (blis validate --from).
	ComparedOnly string       `json:"compared_only,omitempty"`
	Calibrated   *Calibration `json:"calibrated,omitempty"`
	// Counters and Phases compare the engine counters, when the run has
	// them.
	Counters *records.Report  `json:"counters,omitempty"`
	Phases   []validate.Phase `json:"phases,omitempty"`

	// Pairs are the requests, measured and simulated, in record order.
	Pairs []validate.Pair `json:"-"`
	// Warnings and Notes are the simulation's (experiment.Result's).
	Warnings, Notes []string `json:"-"`
	// ReplayWallS is the wall time of the final replay.
	ReplayWallS float64 `json:"-"`

	source   string
	busyMs   float64 // the engines' busy time, for the lockstep line
	counters *Counters
	windows  int
	e        *experiment.Experiment // as replayed (calibrated)
}

// Run replays m on the experiment d describes and compares. What m
// records of its deployment (Meta) sets every key whose flag d was not
// given; records measured at the engine core are compared without the
// output delay unless a flag gives one.
func Run(ctx context.Context, m *Measured, d *experiment.Draft, o Options) (*Report, error) {
	if m.Meta != nil {
		if err := applyMeta(d, m.Meta); err != nil {
			return nil, err
		}
	}
	for _, st := range m.Settings {
		switch {
		case d.FlagGiven(st.Flag):
		case st.Missing != "":
			return nil, errors.New(st.Missing)
		default:
			if err := d.SetFlagAs(st.Flag, st.Value, st.Source); err != nil {
				return nil, err
			}
		}
	}
	if m.At == records.AtEngine && !d.FlagGiven("output-delay-us") {
		if err := d.SetFlagAs("output-delay-us", "0", "records measured at the engine core"); err != nil {
			return nil, err
		}
	}
	e, err := d.Resolve()
	if err != nil {
		return nil, err
	}
	if m.ArrivalAtEngine {
		// vLLM's arrival_time is when its engine accepted the request (token
		// ids in, no API server): nothing of the API path precedes it.
		for i := range e.Deployment.Pools {
			e.Deployment.Pools[i].Instance.ArrivalAtEngine = true
		}
	}
	reqs, _, err := records.ToRequests(m.Records)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Source, err)
	}
	r := &Report{Tool: "blis validate", Version: 1, Records: m.Read, MeasuredAt: m.At, source: m.Source, counters: m.Counters}
	if m.Meta != nil {
		r.Meta = m.Meta.Path
	}
	if o.Calibrate {
		if m.Compare != nil {
			return nil, errors.New("--from with --calibrate: the calibration would fit the simulator on the held-out requests it then compares")
		}
		if r.Calibrated, err = calibrate(ctx, e, m, reqs); err != nil {
			if errors.Is(err, validate.ErrNothingToCompare) {
				return nil, fmt.Errorf("--calibrate: %s: %w", m.Source, err)
			}
			return nil, err
		}
	}
	var tickUs int64
	if m.Counters != nil {
		tickUs = m.Counters.TickUs
	}
	start := time.Now()
	sr, err := simulate(ctx, e, reqs, tickUs)
	if errors.Is(err, cluster.ErrTooManyWindows) && tickUs > 0 {
		// The windows are the counters' ticks, not a --window the user gave.
		c := m.Counters
		return nil, fmt.Errorf("%s %s: ticks %v s apart (the median spacing of column t, in seconds) are too short to compare the run over: the simulation would need more time windows than it keeps; is column t in seconds?",
			c.label(), c.Path, float64(tickUs)/1e6)
	}
	if err != nil {
		return nil, err
	}
	r.ReplayWallS = time.Since(start).Seconds()
	r.e, r.Deployment, r.Engines = e, sr.echo, sr.engines
	r.Warnings, r.Notes = sr.run.Warnings, sr.run.Notes
	r.Pairs = pairUp(m.Records, reqs, sr.res)
	if m.Compare != nil {
		kept := r.Pairs[:0]
		for i, p := range r.Pairs {
			if m.Compare[i] {
				kept = append(kept, p)
			}
		}
		r.Pairs, r.ComparedOnly = kept, m.CompareNote
	}
	r.Compare = validate.Compare(r.Pairs)
	r.Lockstep = lockstepOf(sr.res)
	for _, in := range sr.res.Instances {
		r.busyMs += in.Metrics.BusyFraction * in.Metrics.DurationS * 1000
	}
	if tickUs > 0 {
		r.Phases = validate.ComparePhases(m.Counters.Ticks, simulatedTicks(sr.res.Windows), sr.engines)
		r.Counters = &m.Counters.Read
		r.windows = len(sr.res.Windows)
	}
	return r, nil
}

// applyMeta sets what a vllm-runs meta.json says on the draft, with its
// flags' meaning, for every setting whose flag the draft was not given.
func applyMeta(d *experiment.Draft, m *records.RunMeta) error {
	set := func(flag, value string) error {
		if d.FlagGiven(flag) {
			return nil
		}
		return d.SetFlagAs(flag, value, m.Path)
	}
	if err := set("model", m.Model); err != nil {
		return err
	}
	if !d.FlagGiven("hardware") {
		if m.Device == "" {
			return fmt.Errorf("%s records no GPU: give --hardware (shipped: %s)", m.Path, strings.Join(physics.BuiltinHardware(), ", "))
		}
		h, ok := physics.HardwareForDevice(m.Device)
		if !ok {
			return fmt.Errorf("%s: GPU %q is not a shipped hardware spec: give --hardware (a shipped name or a spec JSON)", m.Path, m.Device)
		}
		if err := set("hardware", h.Name); err != nil {
			return err
		}
	}
	for _, v := range []struct {
		flag, value string
		given       bool
	}{
		{"tp", fmt.Sprint(m.TP), true},
		{"data-parallel-size", fmt.Sprint(max(1, m.DP)), true},
		{"enable-expert-parallel", fmt.Sprint(m.ExpertParallel), true},
		{"max-num-seqs", fmt.Sprint(m.MaxNumSeqs), m.MaxNumSeqs > 0},
		{"max-num-batched-tokens", fmt.Sprint(m.MaxBatchedTokens), m.MaxBatchedTokens > 0},
		{"kv-blocks-gpu", fmt.Sprint(m.KVBlocksGPU), m.KVBlocksGPU > 0},
		{"block-size", fmt.Sprint(m.BlockSize), m.BlockSize > 0},
		{"gpu-memory-utilization", fmt.Sprint(m.GPUMemoryUtilization), m.GPUMemoryUtilization > 0},
		{"enable-prefix-caching", fmtBool(m.PrefixCaching), m.PrefixCaching != nil},
		{"enable-chunked-prefill", fmtBool(m.ChunkedPrefill), m.ChunkedPrefill != nil},
		{"async-scheduling", fmtBool(m.AsyncScheduling), m.AsyncScheduling != nil},
		{"enforce-eager", fmtBool(m.EnforceEager), m.EnforceEager != nil},
		{"vllm-version", m.VLLMVersion, m.VLLMVersion != ""},
		{"scheduler-reserve-full-isl", fmtBool(m.ReserveFullISL), m.ReserveFullISL != nil},
	} {
		if !v.given {
			continue
		}
		if err := set(v.flag, v.value); err != nil {
			return err
		}
	}
	return nil
}

func fmtBool(b *bool) string {
	if b == nil {
		return ""
	}
	return fmt.Sprint(*b)
}

// simulated is one replay's outcome.
type simulated struct {
	res     *cluster.Result
	echo    experiment.InstanceEcho
	engines int
	run     *experiment.Result
}

// simulate runs the requests on the experiment's deployment: one engine,
// or data-parallel engines behind vLLM's balancer, as a cluster that
// keeps every request's record; windowUs > 0 also cuts the run into
// windows of that length.
func simulate(ctx context.Context, e *experiment.Experiment, reqs []sim.RequestSpec, windowUs int64) (*simulated, error) {
	x := *e
	x.Mode = experiment.ModeCluster
	x.Workload = experiment.Workload{Kind: experiment.Requests, Requests: reqs}
	x.Run.PerRequest = true
	x.Run.WindowUs = windowUs
	res, err := experiment.Run(ctx, &x, &experiment.MemSinks{})
	if err != nil {
		return nil, err
	}
	rep := res.Report.(*experiment.ClusterReport)
	return &simulated{res: res.Cluster, echo: rep.Config.Pools[0].InstanceEcho, engines: rep.Config.Instances, run: res}, nil
}

// pairUp matches each record (sorted by arrival, as reqs[i] was made from
// recs[i]) with its simulated request.
func pairUp(recs []records.Record, reqs []sim.RequestSpec, res *cluster.Result) []validate.Pair {
	byID := make(map[int64]*cluster.RequestRecord, len(res.PerRequest))
	for i := range res.PerRequest {
		byID[res.PerRequest[i].ID] = &res.PerRequest[i]
	}
	pairs := make([]validate.Pair, len(recs))
	for i := range recs {
		r := &recs[i]
		p := validate.Pair{ID: reqs[i].ID, Line: r.Line, PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens,
			MeasTTFT: r.TTFTUs, MeasITL: r.MeanITLUs, MeasE2E: r.E2EUs, SimTTFT: -1, SimITL: -1, SimE2E: -1}
		if s, ok := byID[reqs[i].ID]; ok && s.Outcome == cluster.Completed.String() {
			p.SimTTFT = s.TTFT
			p.SimE2E = s.LastTokenUs - s.ArrivalUs
			if s.OutputTokens > 1 {
				p.SimITL = (s.LastTokenUs - s.ArrivalUs - s.TTFT) / (s.OutputTokens - 1)
			}
		}
		pairs[i] = p
	}
	return pairs
}

// lockstepOf sums the engines' lockstep results, nil when none stepped in
// lockstep.
func lockstepOf(res *cluster.Result) *sim.LockstepResult {
	var sum *sim.LockstepResult
	for _, in := range res.Instances {
		if l := in.Metrics.Lockstep; l != nil {
			if sum == nil {
				sum = &sim.LockstepResult{}
			}
			sum.WaitMs += l.WaitMs
			sum.DummySteps += l.DummySteps
		}
	}
	return sum
}

// simulatedTicks are the simulation's windows as engine counters.
func simulatedTicks(ws []cluster.Window) []validate.CounterSecond {
	out := make([]validate.CounterSecond, len(ws))
	for i, w := range ws {
		d := float64(w.EndUs-w.StartUs) / 1e6
		out[i] = validate.CounterSecond{PromptPerS: float64(w.PromptTokens) / d, GenerationPerS: float64(w.GenerationTokens) / d,
			Running: w.Running, Waiting: w.QueueDepth}
	}
	return out
}
