// Package experiment is one run of the simulator as a value: a deployment
// (pools of vLLM instances and the router in front of them), a workload,
// a policy bundle and run options, read from one versioned YAML file (or
// assembled by blis run from its flags) and run in-process by Run. It is
// the unit that blis run, sweeps and policy-search adapters share.
//
// An experiment file (docs/experiment.md describes every key):
//
//	version: 1
//	deployment:
//	  mode: cluster                 # or instance: one engine, no router
//	  pools:
//	    - {name: h100, replicas: 4, model: llama-3.1-8b, hardware: h100-sxm}
//	  router: {admission_latency_us: 0, routing_latency_us: 0}
//	workload:
//	  scenario: mixed-slo           # or synthetic, spec, spec_file, replay
//	policies:
//	  routing: {type: weighted}
//	run:
//	  seed: 42
//
// The life of an experiment: a Draft gathers what was given (a file, a
// legacy deployment file, a policy file, flags, --set), each over the one
// before, remembering where each value came from; Resolve fills every
// default and checks every key, so that an error names the file and line,
// or the flag, of the value at fault; Marshal writes the resolved
// experiment back (blis run --print-config), which read again gives the
// identical run; Run simulates it and returns the Report that blis run
// prints.
//
// Invariants: Resolve never returns an Experiment a run would refuse for a
// reason it could have seen without reading the workload's trace or the
// model files; a key that has no effect in the experiment's mode is an
// error, never silently ignored; the same Experiment and seed give a
// byte-identical Report whatever the worker count.
package experiment

import (
	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/disagg"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/policy"
	"github.com/blis-sim/blis/sim"
	"github.com/blis-sim/blis/sim/simtrace"
	"github.com/blis-sim/blis/sim/workload"
	"gopkg.in/yaml.v3"
)

// Version is the experiment file version this package reads and writes.
const Version = 1

// Mode is how the deployment runs.
type Mode string

const (
	// ModeInstance is one vLLM engine serving the workload directly, with
	// no admission or router (blis run's single-instance output).
	ModeInstance Mode = "instance"
	// ModeCluster is the pools behind admission and a router, on one
	// clock (docs/cluster.md).
	ModeCluster Mode = "cluster"
)

// Experiment is a resolved experiment: every default filled in, every
// value checked. Build one with Draft.Resolve (or Default).
type Experiment struct {
	Mode       Mode
	Deployment deploy.Deployment
	Workload   Workload
	Policies   policy.Bundle
	Run        RunOptions

	draft *Draft // where each value came from, for errors found by Run
}

// WorkloadKind is where the requests come from.
type WorkloadKind string

const (
	Synthetic WorkloadKind = "synthetic" // workload.Spec's generator
	SpecNode  WorkloadKind = "spec"      // a workload spec written in the experiment
	SpecFile  WorkloadKind = "spec_file" // a workload spec file
	Scenario  WorkloadKind = "scenario"  // a built-in workload spec
	Replay    WorkloadKind = "replay"    // a trace replayed
	// Requests are given in-process (Workload.Requests), by a caller such
	// as blis validate; an experiment file cannot hold them.
	Requests WorkloadKind = "requests"
)

// Workload is the experiment's requests.
type Workload struct {
	Kind WorkloadKind
	// RateScale multiplies every arrival rate (default 1): the synthetic
	// rate, a spec's open-loop rate (every tenant's share), a replayed
	// trace's (its arrival times divided by it). Closed-loop clients,
	// think times and a spec's bursts are not rates and stay as they are.
	RateScale float64
	// Synthetic is the generator's spec (Kind synthetic), with its length
	// distributions as written.
	// Rate is the synthetic rate as written (Synthetic.Rate is it times
	// RateScale).
	Synthetic              workload.Spec
	Rate                   float64
	PromptDist, OutputDist string
	// Spec is the workload spec (Kind spec, spec_file, scenario); Node,
	// File and Scenario say where it came from.
	Spec     *workload.WorkloadSpec
	Node     *yaml.Node
	File     string
	Scenario string
	// Replay is the trace (Kind replay).
	Replay ReplaySource
	// Requests are the requests (Kind requests), sorted by arrival with
	// increasing ids.
	Requests []sim.RequestSpec
}

// ReplaySource is a trace to replay and how to read it.
type ReplaySource struct {
	Path   string
	Format string // workload.ReplayFormats; auto detects it
	Strict bool   // fail on the first unreadable row instead of skipping it
}

// TraceLevel is how much of the run's decisions is written.
type TraceLevel string

const (
	TraceNone      TraceLevel = "none"      // nothing: no cost
	TraceDecisions TraceLevel = "decisions" // every admission and routing decision
	// TraceDetailed adds each instance's batch formations, preemptions
	// and KV offload/reload records.
	TraceDetailed TraceLevel = "detailed"
)

// RunOptions are how the experiment runs and what it writes.
type RunOptions struct {
	Seed            int64
	HorizonS        float64 // stop after this many simulated seconds (0: serve everything)
	PerRequest      bool    // one record per request in the report
	DebugInvariants bool    // every invariant after every step (slow)
	// Workers is the goroutines advancing instances between cluster
	// events (0: one per CPU); the report is the same for any value.
	Workers         int
	TraceLevel      TraceLevel
	CounterfactualK int // candidates per routing decision in the decision trace, alternatives simulated per sampled decision
	// CounterfactualSample is the sampling of routing decisions for TTFT
	// regret ("" or "0": none; a rate or every:N, cluster.ParseSample).
	CounterfactualSample string
	// SummaryMaxTokens bounds the summary (Outputs.Summary), in tokens
	// counted by summary.Tokens.
	SummaryMaxTokens int
	// Fitness weights the report's fitness score (nil: none), in order.
	Fitness []cluster.FitnessWeight
	// WindowUs cuts the run into time windows (0: none); Window is it as
	// written ("5s").
	WindowUs int64
	Window   string
	// Warmup is how the output analysis removes the warm-up: auto (MSER),
	// none, or a duration as written (WarmupUs); Precision, when > 0, sizes
	// the run: it stops once PrecisionMetric's 95 % interval is within
	// Precision of its estimate and the run is stable, or it is unstable,
	// or at MaxRequests arrivals or MaxSimTimeUs (docs/statistics.md).
	Warmup          string
	WarmupUs        int64
	Precision       float64
	PrecisionMetric string
	MaxRequests     int64
	MaxSimTime      string
	MaxSimTimeUs    int64
	// OTLP are the trace's sampling options (with an OTLP trace output).
	OTLP    simtrace.Options
	Outputs Outputs
}

// Outputs are the files a run writes besides its report; "" for none.
// Paths are relative to the working directory.
type Outputs struct {
	OTLPTrace     string // the run as vLLM's OTLP traces (JSON lines)
	KVEvents      string // KV offload events (single instance, CPU tier)
	DecisionTrace string // trace_level decisions or detailed
	Summary       string // the run's Markdown summary (package summary)
	WindowOut     string // time windows, .csv or .jsonl
	WindowPlot    string // time windows, .png, .svg or .pdf
}

// Default is the experiment blis run runs without flags: Llama-3.1-8B on
// one H100 serving 1,000 synthetic requests at 8/s.
func Default() *Experiment {
	e, err := NewDraft().Resolve()
	if err != nil {
		panic("experiment: the default does not resolve: " + err.Error())
	}
	return e
}

// Disaggregated reports whether e splits requests between prefill and
// decode instances (policies.disaggregation is not never).
func (e *Experiment) Disaggregated() bool {
	return e.Policies.Disaggregation.Type != disagg.NeverName
}
