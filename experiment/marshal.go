package experiment

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/policy"
	"github.com/blis-sim/blis/sim/workload"
)

// Marshal writes e as an experiment file with every key that has an
// effect in its mode, defaults filled in (blis run --print-config):
// Parse of the result resolves to an experiment that runs identically.
// An input file's path is written absolute, so that the file reads the
// same files wherever it is put (a relative path in a file is read from
// the file's folder first); a shipped name stays a name;
// a latency model left to choose is "auto", an inline workload spec is
// written as given.
func (e *Experiment) Marshal() ([]byte, error) {
	if e.Workload.Kind == Requests {
		return nil, fmt.Errorf("an experiment whose requests were given in-process cannot be written as a file")
	}
	root := mapping()
	add(root, "version", Version)
	add(root, "deployment", e.deploymentNode())
	add(root, "workload", e.workloadNode())
	pol := mapping()
	for _, k := range policy.Kinds {
		if e.Mode == ModeInstance && k != policy.Priority && k != policy.Scheduler {
			continue
		}
		if k == policy.Disaggregation && !e.Disaggregated() {
			continue // never: the section, the roles and the network have no effect
		}
		add(pol, string(k), e.Policies.Section(k).Node())
	}
	add(root, "policies", pol)
	add(root, "run", e.runNode())
	var b bytes.Buffer
	b.WriteString("# blis experiment (docs/experiment.md): every key that has an effect in this mode, defaults filled in\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func mapping() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode} }

// add appends key: v to m; v is a node or a value to encode (nil
// pointers are left out).
func add(m *yaml.Node, key string, v any) {
	n, ok := v.(*yaml.Node)
	if !ok {
		n = &yaml.Node{}
		if err := n.Encode(v); err != nil {
			panic(fmt.Sprintf("experiment: encoding %s: %v", key, err))
		}
	}
	prune(n)
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, n)
}

// prune drops the null values of mappings (the shape's absent keys).
func prune(n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		for _, c := range n.Content {
			prune(c)
		}
		return
	}
	var keep []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		v := n.Content[i+1]
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue
		}
		prune(v)
		keep = append(keep, n.Content[i], v)
	}
	n.Content = keep
}

func (e *Experiment) deploymentNode() *yaml.Node {
	d := mapping()
	add(d, "mode", string(e.Mode))
	var pools []deploy.PoolYAML
	for _, p := range e.Deployment.Pools {
		y := deploy.PoolYAML{Name: p.Name, Replicas: &p.Replicas, InstanceYAML: p.Instance.YAML()}
		for _, q := range []*string{y.Model, y.Hardware, y.HostProfile} {
			absPath(q)
		}
		if y.Latency != nil {
			absPath(y.Latency.Coefficients)
		}
		if e.Mode == ModeCluster { // the fleet's keys make a run a cluster
			y.FleetYAML = p.Fleet.YAML()
		}
		if e.Disaggregated() {
			y.Role = &p.Role
		}
		pools = append(pools, y)
	}
	add(d, "pools", pools)
	if e.Mode == ModeCluster {
		r := e.Deployment.Router
		wait := float64(r.CapacityWaitTimeoutUs) / 1e6
		ry := routerYAML{AdmissionLatencyUs: &r.AdmissionLatencyUs, RoutingLatencyUs: &r.RoutingLatencyUs, SnapshotRefreshUs: &refreshYAML{}, CapacityWaitTimeoutS: &wait}
		for i, p := range ry.SnapshotRefreshUs.signals() {
			*p = &r.Freshness[cluster.Signal(i)]
		}
		add(d, "router", ry)
		if ks := e.Deployment.KVStore; ks != nil {
			add(d, "kv_store", ks.YAML())
		}
	}
	if e.Disaggregated() {
		n := e.Deployment.Network
		nic, abort := n.NICBytesPerSec/1e9, float64(n.AbortTimeoutUs)/1e6
		add(d, "network", networkYAML{NICGBPerSec: &nic, Efficiency: &n.Efficiency, LatencyUs: &n.LatencyUs, AbortTimeoutS: &abort})
	}
	return d
}

func (e *Experiment) workloadNode() *yaml.Node {
	w := &e.Workload
	n := mapping()
	add(n, "rate_scale", w.RateScale)
	switch w.Kind {
	case Synthetic:
		s := w.Synthetic
		y := syntheticYAML{Requests: &s.Requests, Rate: &w.Rate, Arrival: &s.Arrival,
			PromptTokens: &w.PromptDist, OutputTokens: &w.OutputDist, PrefixGroups: &s.PrefixGroups}
		if s.Arrival == workload.ArrivalGamma {
			y.GammaCV = &s.GammaCV
		}
		if s.PrefixGroups > 0 {
			y.PrefixTokens, y.PrefixFraction = &s.PrefixTokens, &s.PrefixFraction
		}
		add(n, "synthetic", y)
	case SpecNode:
		add(n, "spec", w.Node)
	case SpecFile:
		f := w.File
		absPath(&f)
		add(n, "spec_file", f)
	case Scenario:
		add(n, "scenario", w.Scenario)
	case Replay:
		r := w.Replay
		absPath(&r.Path)
		add(n, "replay", replayYAML{Path: &r.Path, Format: &r.Format, Strict: &r.Strict})
	}
	return n
}

func (e *Experiment) runNode() *yaml.Node {
	r := &e.Run
	n := mapping()
	add(n, "seed", r.Seed)
	add(n, "horizon_s", r.HorizonS)
	add(n, "per_request", r.PerRequest)
	add(n, "debug_invariants", r.DebugInvariants)
	add(n, "warmup", r.Warmup)
	add(n, "precision", r.Precision)
	if r.Precision > 0 {
		add(n, "precision_metric", r.PrecisionMetric)
		add(n, "max_requests", r.MaxRequests)
		add(n, "max_sim_time", r.MaxSimTime)
	}
	o := r.Outputs
	out := outputsYAML{OTLPTrace: &o.OTLPTrace}
	if e.Mode == ModeInstance {
		out.KVEvents = &o.KVEvents
	} else {
		add(n, "workers", r.Workers)
		add(n, "trace_level", string(r.TraceLevel))
		if r.TraceLevel != TraceNone || r.CounterfactualSample != "" {
			add(n, "counterfactual_k", r.CounterfactualK)
		}
		if r.CounterfactualSample != "" {
			add(n, "counterfactual_sample", r.CounterfactualSample)
		}
		if r.Outputs.Summary != "" {
			add(n, "summary_max_tokens", r.SummaryMaxTokens)
		}
		if len(r.Fitness) > 0 {
			fw := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			for _, w := range r.Fitness {
				add(fw, w.Key, w.Weight)
			}
			add(n, "fitness_weights", fw)
		}
		add(n, "window", r.Window)
		out.DecisionTrace, out.WindowOut, out.WindowPlot = &o.DecisionTrace, &o.WindowOut, &o.WindowPlot
		if o.Summary != "" {
			out.Summary = &o.Summary
		}
	}
	if r.Outputs.OTLPTrace != "" {
		o := r.OTLP
		add(n, "otlp", otlpYAML{JourneySampleRate: &o.JourneySampleRate, StepSampleRate: &o.StepSampleRate, RichSubsampleRate: &o.RichSubsampleRate,
			ClosureInterval: &o.ClosureInterval, MaxEventsPerSpan: &o.MaxEventsPerSpan, Route: &o.Route})
	}
	add(n, "outputs", out)
	return n
}

// Get is the value at key in e's marshaled form (a scalar as text, else
// the YAML of the mapping or list), and whether e has that key: how
// sweeps and adapters read an experiment by the keys they set.
func (e *Experiment) Get(key string) (string, bool) {
	data, err := e.Marshal()
	if err != nil {
		return "", false
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return "", false
	}
	segs, err := parsePath(key)
	if err != nil {
		return "", false
	}
	n := doc.Content[0]
	for _, s := range segs {
		var next *yaml.Node
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == s.name {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return "", false
		}
		if s.index >= 0 {
			if next.Kind != yaml.SequenceNode || s.index >= len(next.Content) {
				return "", false
			}
			next = next.Content[s.index]
		}
		n = next
	}
	if n.Kind == yaml.ScalarNode {
		return n.Value, true
	}
	out, err := yaml.Marshal(n)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(out)), true
}

// absPath makes *p absolute when it names a file or folder that exists
// (the one it was read from: a file goes before a shipped name of the
// same spelling), so that a file written with it reads it from any
// folder.
func absPath(p *string) {
	if p == nil || *p == "" || filepath.IsAbs(*p) || !exists(*p) {
		return
	}
	if a, err := filepath.Abs(*p); err == nil {
		*p = a
	}
}
