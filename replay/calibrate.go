package replay

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/workload/records"
	"github.com/blis-sim/blis/validate"
)

// Calibration is what Options.Calibrate found.
type Calibration struct {
	// Flags are the fitted values by flag name (without dashes).
	Flags map[string]float64 `json:"flags"`
	// Pipeline names the flags that carry to any deployment on the same
	// vLLM build and host (the engine core's per-step cost, the output
	// delay); the others (the roofline's efficiencies) describe this
	// deployment's kernels and carry only to runs of the same GPU, model
	// and parallelism.
	Pipeline    []string `json:"pipeline_flags"`
	Loss        float64  `json:"loss"`
	StartLoss   float64  `json:"start_loss"`
	Simulations int      `json:"simulations"`
	WallS       float64  `json:"wall_s"`
}

// knob is one parameter the calibration fits.
type knob struct {
	param    validate.Param
	flag     string
	get      func() float64
	set      func(*deploy.InstanceSpec, float64)
	pipeline bool // carries to other deployments (Calibration.Pipeline)
}

// calibrate fits the pipeline's parameters to the records and sets them
// on e's first pool: with the roofline latency model, its compute and
// bandwidth efficiency (shares in (0.1, 1) and (0.3, 1)) and per-step
// overhead (50 µs – 50 ms), and for records measured at the client the
// output delay (10 µs – 200 ms). The search is coordinate descent with a
// golden-section search per parameter over its range (log scale), two
// rounds of 16 simulations each, minimizing validate.Objective (the sum of
// squared log ratios of the simulated to the measured mean TTFT, ITL and
// E2E).
func calibrate(ctx context.Context, e *experiment.Experiment, m *Measured, reqs []sim.RequestSpec) (*Calibration, error) {
	spec := &e.Deployment.Pools[0].Instance
	var knobs []knob
	// The step-time parameters are the roofline's; probe which model the
	// spec chooses.
	in, err := spec.Build(sim.NewRNG(e.Run.Seed), 0)
	if err != nil {
		_, err := simulate(ctx, e, reqs[:0], 0) // the error, placed
		return nil, err
	}
	var withRoofline *deploy.RooflineParams // the roofline parameters to start from, nil without the roofline
	if in.LatencyName == "roofline" {
		rp := deploy.DefaultRooflineParams
		if spec.Latency.Roofline != nil {
			rp = *spec.Latency.Roofline
		}
		// The roofline's own parameters, the GPU's and engine's: compute
		// and bandwidth efficiency first, so that the per-step overhead
		// takes what they leave rather than absorbing a step-time error
		// that scales with the batch.
		knobs = append(knobs,
			knob{validate.Param{Name: "compute efficiency", Lo: 0.1, Hi: 1, Log: true}, "roofline-compute-eff",
				func() float64 { return rp.ComputeEff },
				func(s *deploy.InstanceSpec, v float64) { s.Latency.Roofline.ComputeEff = v }, false},
			knob{validate.Param{Name: "bandwidth efficiency", Lo: 0.3, Hi: 1, Log: true}, "roofline-bandwidth-eff",
				func() float64 { return rp.BandwidthEff },
				func(s *deploy.InstanceSpec, v float64) { s.Latency.Roofline.BandwidthEff = v }, false},
			knob{validate.Param{Name: "step overhead", Lo: 50, Hi: 50000, Log: true}, "roofline-step-overhead-us",
				func() float64 { return in.StepCost.FixedUs }, // what the deployment implies unless given
				func(s *deploy.InstanceSpec, v float64) {
					s.Latency.Roofline.StepOverheadUs, s.Latency.Roofline.StepOverheadSet = v, true
				}, true})
		withRoofline = &rp
	}
	if m.At == records.AtClient {
		knobs = append(knobs, knob{validate.Param{Name: "output delay", Lo: 10, Hi: 200000, Log: true}, "output-delay-us",
			func() float64 { return float64(max(spec.OutputDelayUs, 10)) },
			func(s *deploy.InstanceSpec, v float64) { s.OutputDelayUs = int64(v) }, true})
	}
	if len(knobs) == 0 {
		return nil, errors.New("--calibrate: nothing to calibrate: the step-time parameters need the roofline latency model, and records measured at the engine core have no output delay")
	}
	search := validate.Search{Rounds: 2, Evals: 16}
	start := make([]float64, len(knobs))
	for i, k := range knobs {
		search.Params = append(search.Params, k.param)
		start[i] = min(max(k.get(), k.param.Lo), k.param.Hi)
	}
	// apply sets the parameters, rounded as their flags print them, on a
	// copy of spec (with its own roofline parameters).
	apply := func(x []float64) deploy.InstanceSpec {
		s := *spec
		if withRoofline != nil {
			p := *withRoofline
			s.Latency.Roofline = &p
		}
		for i, k := range knobs {
			k.set(&s, roundFlag(k.param, x[i]))
		}
		return s
	}
	t0 := time.Now()
	res, err := search.Run(start, func(x []float64) (float64, error) {
		x2 := *e
		x2.Deployment.Pools = []deploy.Pool{e.Deployment.Pools[0]}
		x2.Deployment.Pools[0].Instance = apply(x)
		r, err := simulate(ctx, &x2, reqs, 0)
		if err != nil {
			return 0, err
		}
		return validate.Objective(validate.Compare(pairUp(m.Records, reqs, r.res))), nil
	})
	if err != nil {
		return nil, err
	}
	best := apply(res.Best)
	pools := append([]deploy.Pool(nil), e.Deployment.Pools...)
	pools[0].Instance = best
	e.Deployment.Pools = pools
	cal := &Calibration{Flags: map[string]float64{}, Loss: res.Loss, StartLoss: res.StartLoss, Simulations: res.Evaluation,
		WallS: time.Since(t0).Seconds()}
	for i, k := range knobs {
		cal.Flags[k.flag] = roundFlag(k.param, res.Best[i])
		if k.pipeline {
			cal.Pipeline = append(cal.Pipeline, k.flag)
		}
	}
	return cal, nil
}

// roundFlag rounds a calibrated value as its flag is set: shares to three
// decimals, microseconds to whole ones.
func roundFlag(p validate.Param, v float64) float64 {
	if p.Hi <= 1 {
		return math.Round(v*1000) / 1000
	}
	return math.Round(v)
}

// HostProfile is what the calibration found that carries to other
// deployments on the same vLLM build and host (deploy.HostProfile), as
// its file; r must have been calibrated with the roofline latency model.
func (r *Report) HostProfile() ([]byte, error) {
	cal := r.Calibrated
	if cal == nil {
		return nil, errors.New("--save-host-profile needs --calibrate: the profile holds what the calibration finds")
	}
	us, ok := cal.Flags["roofline-step-overhead-us"]
	if !ok {
		return nil, errors.New("--save-host-profile: the calibration fitted no per-step cost (it needs the roofline latency model; this run uses another: --latency roofline)")
	}
	spec := r.e.Deployment.Pools[0].Instance
	h := &deploy.HostProfile{StepOverheadUs: us, CalibratedOn: deploy.HostRun{Records: r.source, Model: spec.Model, Hardware: spec.Hardware,
		VLLMVersion: spec.VLLMVersion, AsyncScheduling: spec.AsyncScheduling, EnforceEager: spec.EnforceEager,
		RooflineKernels: spec.Latency.Roofline == nil || !spec.Latency.Roofline.Scalar}}
	if d, ok := cal.Flags["output-delay-us"]; ok {
		od := int64(d)
		h.OutputDelayUs = &od
	}
	return h.Marshal()
}
