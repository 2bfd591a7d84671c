package experiment_test

// The experiment generator: random whole experiments (pools with
// autoscalers and drains, prefill/decode layouts, KV tiers and a store,
// networks, router latencies, tenants with timeouts, time and rate keys
// at their extremes: sub-µs, 1e-15, 1e300), each run briefly under every
// invariant. A generated experiment either runs cleanly or is refused
// with an error naming a key; a panic, an invariant failure, a time out
// of the clock's range, a request not accounted for, a report that
// differs between two runs or between 1 and 2 workers, an error naming
// no key, or a run past its wall-time or memory bound is a failure, which
// prints the experiment file that reproduces it.
//
// The generator reads its choices from bytes (the fuzzer's input): each
// choice takes a byte, and an exhausted input chooses the first option,
// which is always the ordinary one, so that short inputs are small
// experiments and the fuzzer's mutations map to changes of one choice.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/sim"
)

// chooser reads a generator's choices from bytes. Its first byte sets
// how wild the experiment is (the chance that a value is not its ordinary
// one, from never to about two in five) and whether it may hold values
// out of their key's range (one experiment in four), so that the corpus
// holds experiments that run, with values at the edges of their ranges,
// as well as ones refused.
type chooser struct {
	data []byte
	i    int
	wild int  // a value is not its ordinary one when a byte is below it
	bad  bool // a value may be out of its key's range
}

var wildness = [...]int{0, 12, 40, 100}

func newChooser(data []byte) *chooser {
	c := &chooser{data: data}
	b := c.byte()
	c.wild = wildness[b%byte(len(wildness))]
	c.bad = b/byte(len(wildness))%4 == 3
	return c
}

func (c *chooser) byte() byte {
	if c.i >= len(c.data) {
		return 0
	}
	b := c.data[c.i]
	c.i++
	return b
}

// n is a choice in [0, n).
func (c *chooser) n(n int) int { return int(c.byte()) % n }

// rare is true for about one byte value in k (never on an exhausted
// input).
func (c *chooser) rare(k int) bool { return c.byte()%byte(k) == byte(k-1) }

// pick is one of the options: the first (ordinary) one unless the
// experiment's wildness says otherwise, and always on an exhausted input.
func (c *chooser) pick(opts ...string) string {
	if int(c.byte()) >= c.wild || len(opts) == 1 {
		return opts[0]
	}
	return opts[1+c.n(len(opts)-1)]
}

// vals are a key's values: ok[0] the ordinary one, the rest of ok in its
// range (its edges and the extremes it takes: sub-µs times, 1e-15 and
// 1e300 where the key takes them), bad out of it.
type vals struct{ ok, bad []string }

// val is one of v: the ordinary value unless the experiment is wild, an
// out-of-range one only in an experiment that may hold them.
func (c *chooser) val(v vals) string {
	if int(c.byte()) >= c.wild {
		return v.ok[0]
	}
	if c.bad && len(v.bad) > 0 && c.rare(2) {
		return v.bad[c.n(len(v.bad))]
	}
	if len(v.ok) == 1 {
		return v.ok[0]
	}
	return v.ok[1+c.n(len(v.ok)-1)]
}

// with is v with another ordinary value.
func (v vals) with(ordinary string) vals {
	return vals{ok: append([]string{ordinary}, v.ok...), bad: v.bad}
}

// Values by kind, at their extremes.
var (
	// Times in seconds: a startup step, a drain's timeout, a node's idle
	// time (at most a week).
	secs = vals{ok: []string{"30", "0", "1e-15", "0.0000001", "0.000001", "0.001", "0.5", "3600", "604800"},
		bad: []string{"604801", "1e9", "1e300", "-1", ".nan", ".inf"}}
	// Short times in seconds (a provisioning delay, an image pull).
	shortS = vals{ok: []string{"1", "0", "1e-15", "0.0000001", "0.001", "0.5"}, bad: []string{"1e300", "-1", ".nan"}}
	// Arrival and refill rates, per second: any positive finite number.
	rates = vals{ok: []string{"8", "1e-15", "0.001", "1", "1000", "1e6", "1e300"}, bad: []string{"0", "-1", ".nan", ".inf"}}
	// Times in whole µs, to 2^40 (a duration's bound).
	micros = vals{ok: []string{"0", "1", "20", "1000", "1000000", "1099511627776"},
		bad: []string{"1099511627777", "4611686018427387904", "9223372036854775807", "-1", "0.5"}}
	// Bandwidths in GB/s.
	gbps = vals{ok: []string{"50", "1e-15", "1e-300", "0.001", "1", "10000", "1e300"}, bad: []string{"0", "-1", ".inf", ".nan"}}
	// Capacities in GB.
	gbs = vals{ok: []string{"100", "1e-9", "0.001", "1", "1000000"}, bad: []string{"1e300", "0", "-1"}}
	// Shares in [0, 1].
	shares = vals{ok: []string{"0.9", "0", "1e-15", "0.5", "0.87", "1"}, bad: []string{"1.5", "-0.1", ".nan"}}
	// Factors >= 1 (a warm-up penalty).
	factors = vals{ok: []string{"1", "2", "100"}, bad: []string{"0.5", "0", "1e-15", "1e300"}}
	prices  = vals{ok: []string{"2.95", "0", "1000000"}, bad: []string{"1e300", "-1"}}
	blocks  = vals{ok: []string{"auto", "40", "200", "5000", "1"}, bad: []string{"0", "-3"}}
	seqs    = vals{ok: []string{"256", "1", "8", "64"}, bad: []string{"0"}}
)

// obj is a YAML mapping in key order.
type obj []kv

type kv struct {
	k string
	v any // string (a scalar as YAML text), obj, or []any
}

func (o *obj) set(k string, v any) { *o = append(*o, kv{k, v}) }

// yamlText writes v as block YAML at indent.
func yamlText(b *strings.Builder, v any, indent string) {
	switch v := v.(type) {
	case obj:
		for _, e := range v {
			switch ev := e.v.(type) {
			case string:
				fmt.Fprintf(b, "%s%s: %s\n", indent, e.k, ev)
			default:
				fmt.Fprintf(b, "%s%s:\n", indent, e.k)
				yamlText(b, ev, indent+"  ")
			}
		}
	case []any:
		for _, e := range v {
			switch ev := e.(type) {
			case string:
				fmt.Fprintf(b, "%s- %s\n", indent, ev)
			case obj:
				var sub strings.Builder
				yamlText(&sub, ev, indent+"  ")
				s := sub.String()
				fmt.Fprintf(b, "%s- %s", indent, strings.TrimPrefix(s, indent+"  "))
			}
		}
	}
}

// genExperiment is an experiment file from c's choices.
func genExperiment(c *chooser) string {
	root := obj{}
	root.set("version", "1")
	nPools := 1 + c.n(3)
	cluster := nPools > 1 || c.n(4) != 3
	autoscale := "none"
	disagg := "never"
	if cluster {
		autoscale = c.pick("none", "hpa", "saturation", "queue-depth", "target-utilization", "kpa", "oscillator")
		if nPools > 1 {
			disagg = c.pick("never", "always", "prefix-threshold")
		}
	}
	store := cluster && c.rare(3)

	dep := obj{}
	if !cluster {
		dep.set("mode", "instance")
	} else if c.rare(3) {
		dep.set("mode", "cluster")
	}
	var pools []any
	for i := range nPools {
		p := obj{}
		p.set("name", fmt.Sprintf("pool%d", i))
		minReplicas := "1"
		if autoscale != "none" {
			minReplicas = c.pick("1", "0", "2")
		}
		if cluster {
			replicas := c.pick("1", "2", "3")
			if minReplicas == "0" && c.rare(2) || c.bad && c.rare(8) {
				replicas = "0" // scale from zero, or refused without an autoscaler
			}
			p.set("replicas", replicas)
		}
		// Pools of different models (or TPs) may share a store: refused
		// naming deployment.kv_store.
		model, hw := "llama-3.1-8b", "h100-sxm"
		switch c.n(6) {
		case 4:
			hw = "a100-80gb"
		case 5:
			model = "qwen2.5-7b"
		}
		p.set("model", model)
		p.set("hardware", hw)
		if c.rare(6) {
			p.set("tp", c.val(vals{ok: []string{"1", "2"}, bad: []string{"0", "3"}}))
		}
		v := obj{}
		v.set("max_num_seqs", c.val(seqs))
		v.set("max_batched_tokens", c.pick("8192", "16", "512", "2048"))
		v.set("total_kv_blocks_gpu", c.val(blocks))
		cpu := c.pick("0", "100", "2000", "1")
		v.set("total_kv_blocks_cpu", cpu)
		if cpu != "0" {
			v.set("offload_threshold", c.val(shares))
		}
		if c.rare(4) {
			v.set("output_delay_us", c.val(micros))
		}
		if c.rare(4) {
			v.set("long_prefill_token_threshold", c.pick("0", "1", "64"))
		}
		if c.rare(5) {
			v.set("chunked_prefill_enabled", c.pick("true", "false"))
		}
		p.set("vllm", v)
		lat := obj{}
		switch c.n(5) {
		case 3:
			// A step time past 2^40 µs (step_overhead_us: 1e300,
			// compute_eff: 1e-15) is refused naming the pool's latency.
			lat.set("model", "roofline")
			ro := obj{}
			ro.set("compute_eff", c.val(vals{ok: []string{"0.7", "0.01", "1", "1e-15"}, bad: []string{"0", "1.5"}}))
			ro.set("step_overhead_us", c.val(vals{ok: []string{"auto", "0", "1", "1000", "1000000", "1e300"}, bad: []string{"-1", "x"}}))
			lat.set("roofline", ro)
		case 4:
			lat.set("model", "blackbox")
		}
		if c.rare(4) {
			lat.set("noise", c.val(vals{ok: []string{"0", "0.05", "2", "1e-15"}, bad: []string{"3", "-1"}}))
		}
		if len(lat) > 0 {
			p.set("latency", lat)
		}
		if cpu != "0" && c.rare(3) {
			tiers := obj{}
			disk := obj{}
			disk.set("capacity_gb", c.val(gbs))
			disk.set("read_gb_per_s", c.val(gbps))
			disk.set("write_gb_per_s", c.val(gbps))
			disk.set("latency_us", c.val(micros))
			tiers.set("disk", disk)
			p.set("kv_tiers", tiers)
		}
		if cluster {
			if autoscale != "none" {
				p.set("min_replicas", minReplicas)
				p.set("max_replicas", c.pick("3", "4", "2"))
			}
			if c.rare(2) {
				nodes := obj{}
				nodes.set("gpus_per_node", c.val(vals{ok: []string{"8", "2", "4"}, bad: []string{"0"}}))
				nodes.set("max_nodes", c.pick("0", "1", "2", "3"))
				lo := c.val(shortS)
				hi := lo
				if c.rare(2) {
					hi = c.val(vals{ok: []string{"480", "1", "30"}, bad: []string{"-1", "1e300"}})
				}
				nodes.set("provision_s", "["+lo+", "+hi+"]")
				nodes.set("idle_s", c.val(secs))
				nodes.set("price_per_gpu_hour", c.val(prices))
				p.set("nodes", nodes)
			}
			if c.rare(2) {
				st := obj{}
				st.set("image_pull_s", c.val(shortS))
				st.set("storage_gb_per_s", c.val(vals{ok: []string{"1", "0.001", "10000"}, bad: []string{"1e-15", "1e300", "0"}}))
				st.set("compile_s", c.val(shortS))
				st.set("graph_capture_s", c.val(shortS))
				st.set("warmup_penalty", c.val(factors))
				st.set("warmup_s", c.val(shortS))
				p.set("startup", st)
			}
			if c.rare(2) {
				dr := obj{}
				dr.set("policy", c.pick("wait", "immediate", "redirect"))
				dr.set("timeout_s", c.val(secs))
				p.set("drain", dr)
			}
			if disagg != "never" {
				// The first pool prefills, the second decodes; others, and
				// any of them in a wild experiment, do both.
				role := []string{"prefill", "decode", "both"}[min(i, 2)]
				if c.rare(5) {
					role = "both"
				}
				p.set("role", role)
			}
		}
		pools = append(pools, p)
	}
	dep.set("pools", pools)
	if cluster {
		if c.rare(2) {
			r := obj{}
			r.set("admission_latency_us", c.val(micros))
			r.set("routing_latency_us", c.val(micros))
			ref := obj{}
			ref.set("queue_depth", c.val(micros))
			ref.set("kv_utilization", c.val(micros))
			r.set("snapshot_refresh_us", ref)
			r.set("capacity_wait_timeout_s", c.val(vals{ok: []string{"300", "0", "1e-15", "0.0000001", "0.001", "1099511"}, bad: []string{"1e300", "-1", ".inf"}}))
			dep.set("router", r)
		}
		if disagg != "never" && c.rare(2) {
			n := obj{}
			n.set("nic_gb_per_s", c.val(gbps))
			n.set("efficiency", c.val(shares.with("0.87")))
			n.set("latency_us", c.val(micros))
			n.set("abort_timeout_s", c.val(secs.with("480")))
			dep.set("network", n)
		}
		if store {
			s := obj{}
			s.set("capacity_gb", c.val(gbs))
			s.set("high_watermark", c.val(shares.with("0.95")))
			s.set("eviction_ratio", c.val(shares.with("0.05")))
			s.set("get_gb_per_s", c.val(gbps))
			s.set("put_gb_per_s", c.val(gbps))
			s.set("latency_us", c.val(micros))
			s.set("sync_us", c.val(vals{ok: []string{"1000", "1", "1099511627776"}, bad: []string{"0", "-1"}}))
			dep.set("kv_store", s)
		}
	}
	root.set("deployment", dep)

	wl := obj{}
	if c.rare(4) {
		wl.set("rate_scale", c.val(vals{ok: []string{"1", "1e-15", "0.5", "1e6"}, bad: []string{"1e300", "0", "-1"}}))
	}
	if cluster && c.rare(3) {
		// A workload spec: tenants in SLO classes, with client timeouts.
		spec := obj{}
		spec.set("requests", c.pick("20", "1", "5", "40"))
		closedOnly := true
		var tenants []any
		for j := range 1 + c.n(3) {
			t := obj{}
			t.set("id", fmt.Sprintf("t%d", j))
			t.set("slo_class", c.pick("interactive", "realtime", "batch"))
			t.set("prompt_tokens", c.pick("const:100", "uniform:1,2000", "const:1"))
			t.set("output_tokens", c.pick("const:20", "const:1", "uniform:1,200"))
			if c.rare(2) {
				t.set("timeout_s", c.val(secs.with("5")))
			}
			if c.rare(4) {
				cl := obj{}
				cl.set("clients", c.pick("2", "1", "10"))
				cl.set("think_time_ms", c.pick("exponential:mean=1000", "const:1", "const:1000000"))
				t.set("closed_loop", cl)
			} else {
				closedOnly = false
			}
			tenants = append(tenants, t)
		}
		if !closedOnly {
			spec.set("rate", c.val(rates))
		}
		spec.set("tenants", tenants)
		wl.set("spec", spec)
	} else {
		syn := obj{}
		syn.set("requests", c.pick("20", "1", "5", "40"))
		syn.set("rate", c.val(rates))
		if c.rare(3) {
			syn.set("arrival", "gamma")
			syn.set("gamma_cv", c.val(vals{ok: []string{"2", "0.001", "0.5", "1000"}, bad: []string{"1e-15", "1e300"}}))
		}
		syn.set("prompt_tokens", c.pick("'uniform:600,1200'", "'const:100'", "'uniform:1,2000'", "'const:1'", "'lognormal:mean=1000,cv=0.8,max=16000'", "'const:200000'"))
		syn.set("output_tokens", c.pick("'const:20'", "'const:1'", "'uniform:1,200'", "'const:1000'"))
		if c.rare(3) {
			syn.set("prefix_groups", c.pick("0", "2", "8"))
		}
		wl.set("synthetic", syn)
	}
	root.set("workload", wl)

	if cluster {
		pol := obj{}
		adm := obj{}
		switch c.pick("always-admit", "token-bucket", "rate-limit", "reject-all") {
		case "token-bucket":
			adm.set("type", "token-bucket")
			pr := obj{}
			pr.set("capacity", c.val(vals{ok: []string{"100", "1", "1e6"}, bad: []string{"0", "1e300"}}))
			pr.set("refill_rate", c.val(rates))
			adm.set("params", pr)
		case "rate-limit":
			adm.set("type", "rate-limit")
			pr := obj{}
			pr.set("rate", c.val(rates))
			adm.set("params", pr)
		case "reject-all":
			adm.set("type", "reject-all")
		}
		if len(adm) > 0 {
			pol.set("admission", adm)
		}
		rt := obj{}
		rt.set("type", c.pick("round-robin", "least-loaded", "weighted", "prefix-affinity", "always-busiest"))
		pol.set("routing", rt)
		if c.rare(3) {
			sc := obj{}
			sc.set("type", c.pick("fcfs", "sjf", "priority-fcfs", "reverse-priority"))
			pol.set("scheduler", sc)
		}
		if autoscale != "none" {
			as := obj{}
			as.set("type", autoscale)
			pr := obj{}
			interval := vals{ok: []string{"15", "0.001", "1", "86400"}, bad: []string{"0.0000001", "1e300", "0"}}
			if autoscale == "oscillator" {
				// An oscillator at 1 ms scales 600,000 times in a 600 s
				// horizon: seconds of work, too close to the fuzz engine's
				// 10 s per input for three runs.
				interval.ok = []string{"15", "1", "86400"}
			}
			pr.set("interval_s", c.val(interval))
			if autoscale == "oscillator" {
				pr.set("step", c.pick("1", "2", "1048576"))
			}
			as.set("params", pr)
			pol.set("autoscale", as)
		}
		if disagg != "never" {
			dg := obj{}
			dg.set("type", disagg)
			if disagg == "prefix-threshold" {
				pr := obj{}
				pr.set("threshold", c.pick("16", "0", "1099511627776"))
				dg.set("params", pr)
			}
			pol.set("disaggregation", dg)
		}
		root.set("policies", pol)
	}

	run := obj{}
	run.set("seed", c.pick("42", "0", "7", "9223372036854775807"))
	horizon := vals{ok: []string{"0", "30", "0.5", "0.000001", "600", "1e12"}, bad: []string{"1e-15", "0.0000001", "1e300", "-1"}}
	if autoscale != "none" {
		// An autoscaler evaluates as long as there is work: a run kept
		// busy for days (a router latency of 2^40 µs) at an interval of
		// 1 ms is a billion evaluations, bounded here by a horizon.
		horizon.ok = []string{"600", "30", "0.5", "0.000001"}
	}
	run.set("horizon_s", c.val(horizon))
	run.set("debug_invariants", "true")
	root.set("run", run)

	var b strings.Builder
	yamlText(&b, root, "")
	return b.String()
}

// Bounds of one generated run: wall time (generous: the machines are
// shared) and the Go heap. The experiments are small (at most 40
// requests of at most 1,000 output tokens) so that a property check,
// three runs, stays far below the fuzz engine's fixed limit of 10 s per
// input (400 generated experiments: median 15 ms, the slowest 0.5 s at a
// load average of 22 on 2 cores).
const (
	runWall  = 60 * time.Second
	runHeap  = 1 << 30
	fileName = "exp.yaml"
)

// outcome is one run of a generated experiment: its report's bytes, or
// the error that refused it.
type outcome struct {
	report []byte
	err    error
}

// runOnce parses, resolves and runs text with workers (0: as the file
// says; only a cluster takes workers) under the wall and heap bounds.
func runOnce(t *testing.T, text string, workers int) (o outcome, fatal string) {
	t.Helper()
	defer func() {
		if v := recover(); v != nil {
			buf := make([]byte, 1<<16)
			fatal = fmt.Sprintf("panic: %v\n%s", v, buf[:runtime.Stack(buf, false)])
		}
	}()
	d, err := experiment.Parse([]byte(text), fileName)
	if err == nil && workers > 0 {
		err = d.Set("run.workers", strconv.Itoa(workers), "the generator")
	}
	var e *experiment.Experiment
	if err == nil {
		e, err = d.Resolve()
	}
	if err != nil {
		return outcome{err: err}, ""
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, runWall, errors.New("unbounded run: past its wall-time bound"))
	defer stop()
	var done atomic.Bool
	go watchHeap(ctx, cancel, &done)
	defer done.Store(true)
	res, err := experiment.Run(ctx, e, &experiment.MemSinks{})
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return o, cause.Error()
	}
	if err != nil {
		return outcome{err: err}, ""
	}
	if msg := checkReport(res); msg != "" {
		return o, msg
	}
	var b bytes.Buffer
	if err := res.WriteJSON(&b); err != nil {
		return o, "the report does not encode: " + err.Error()
	}
	return outcome{report: b.Bytes()}, ""
}

// watchHeap cancels the run when the Go heap passes runHeap.
func watchHeap(ctx context.Context, cancel context.CancelCauseFunc, done *atomic.Bool) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	for !done.Load() && ctx.Err() == nil {
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() > runHeap {
			cancel(fmt.Errorf("unbounded memory: the heap passed %d MiB", runHeap>>20))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkReport checks what the report says against the invariants a test
// can see from outside: every request accounted for, no time out of the
// clock's range, and no pool's mean size above its peak.
func checkReport(res *experiment.Result) string {
	if c := res.Cluster; c != nil {
		n := c.Requests
		inSystem := n.AwaitingCapacity + n.AwaitingRouting + n.InTransit + n.StillInAPI + n.StillQueued + n.StillRunning
		ended := n.Completed + n.Rejected + n.DroppedUnservable + n.RejectedTooLong + n.TimedOut + n.Killed
		if n.Arrived != ended+inSystem {
			return fmt.Sprintf("conservation: arrived %d != completed %d + rejected %d + dropped %d + too long %d + timed out %d + killed %d + in the system %d",
				n.Arrived, n.Completed, n.Rejected, n.DroppedUnservable, n.RejectedTooLong, n.TimedOut, n.Killed, inSystem)
		}
		if msg := checkSeconds("duration_s", c.DurationS); msg != "" {
			return msg
		}
		if f := c.Fleet; f != nil {
			for _, p := range f.Pools {
				if p.MeanReplicas > float64(p.PeakReplicas)*(1+1e-12) { // a mean's rounding
					return fmt.Sprintf("pool %s: mean_replicas %v above peak_replicas %d", p.Name, p.MeanReplicas, p.PeakReplicas)
				}
			}
		}
	}
	if r := res.Instance; r != nil {
		n := r.Requests
		inSystem := n.StillArrival + n.StillQueued + n.StillRunning
		ended := n.Completed + n.Dropped + n.RejectedTooLong + n.TimedOut + n.Killed + n.Redirected + n.HandedOff
		if n.Injected != ended+inSystem {
			return fmt.Sprintf("conservation: injected %d != completed %d + dropped %d + too long %d + timed out %d + killed %d + in the system %d",
				n.Injected, n.Completed, n.Dropped, n.RejectedTooLong, n.TimedOut, n.Killed, inSystem)
		}
		if msg := checkSeconds("duration_s", r.DurationS); msg != "" {
			return msg
		}
	}
	var b bytes.Buffer
	if err := res.WriteJSON(&b); err != nil {
		return "the report does not encode: " + err.Error()
	}
	var doc any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		return "the report does not decode: " + err.Error()
	}
	return checkTimes("", doc)
}

// maxS is the clock's range in seconds.
var maxS = float64(sim.MaxTimeUs) / 1e6

func checkSeconds(key string, s float64) string {
	if math.IsNaN(s) || s < 0 || s > maxS {
		return fmt.Sprintf("%s = %v: a time out of the clock's range [0, %v s] (a wrapped or unbounded clock)", key, s, maxS)
	}
	return ""
}

// checkTimes walks the report: every time (a key ending in _us, _ms or _s,
// or a latency distribution's statistic) must be within the clock's range.
func checkTimes(path string, v any) string {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := path + "." + k
			if f, ok := x.(float64); ok {
				var s float64
				switch {
				case strings.HasSuffix(k, "_us"):
					s = f / 1e6
				case strings.HasSuffix(k, "_ms") || strings.Contains(path, "_ms"):
					s = f / 1e3
				case strings.HasSuffix(k, "_s"):
					s = f
				default:
					continue
				}
				if strings.Contains(k, "regret") || strings.Contains(k, "delta") || strings.Contains(k, "per_s") {
					continue // signed differences, rates
				}
				if msg := checkSeconds(p, s); msg != "" {
					return msg
				}
				continue
			}
			if msg := checkTimes(p, x); msg != "" {
				return msg
			}
		}
	case []any:
		for i, x := range v {
			if msg := checkTimes(fmt.Sprintf("%s[%d]", path, i), x); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// namesKey reports whether a refusal names what to change: an experiment
// key (experiment.Error's Keys) or the file's line.
func namesKey(err error) bool {
	var ee *experiment.Error
	if errors.As(err, &ee) && len(ee.Keys) > 0 {
		return true
	}
	return strings.HasPrefix(err.Error(), fileName+":")
}

// checkExperiment runs text as the generator's property says, and fails t
// with the file on any failure.
func checkExperiment(t *testing.T, text string) {
	t.Helper()
	if msg := property(t, text); msg != "" {
		t.Fatalf("%s\nthe experiment (%s):\n%s", msg, fileName, text)
	}
}

// property is what is wrong with running text ("" when nothing is): the
// first run, again, and with 2 workers.
func property(t *testing.T, text string) string {
	t.Helper()
	first, fatal := runOnce(t, text, 1)
	if fatal != "" {
		return fatal
	}
	if first.err != nil && strings.Contains(first.err.Error(), "run.workers") {
		// Only a cluster takes workers.
		if first, fatal = runOnce(t, text, 0); fatal != "" {
			return fatal
		}
	}
	if err := first.err; err != nil {
		var inv *sim.InvariantError
		if errors.As(err, &inv) {
			return fmt.Sprintf("invariant %s failed: %v", inv.Invariant, err)
		}
		if !namesKey(err) {
			return fmt.Sprintf("refused with an error that names no key: %v", err)
		}
		return ""
	}
	again, fatal := runOnce(t, text, 1)
	if fatal != "" {
		return "second run: " + fatal
	}
	if again.err != nil || !bytes.Equal(first.report, again.report) {
		return fmt.Sprintf("the same experiment twice gave different reports (%v):\n%s", again.err, firstDiff(first.report, again.report))
	}
	if strings.Contains(text, "policies:") {
		two, fatal := runOnce(t, text, 2)
		if fatal != "" {
			return "2 workers: " + fatal
		}
		if two.err != nil || !bytes.Equal(first.report, two.report) {
			return fmt.Sprintf("1 and 2 workers gave different reports (%v):\n%s", two.err, firstDiff(first.report, two.report))
		}
	}
	return ""
}

// firstDiff is the first line where a and b differ.
func firstDiff(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n  %s\n  %s", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("%d lines against %d", len(la), len(lb))
}

// genSeeds are the seed corpus's inputs: bytes from a fixed PRNG, so that
// go test runs the same experiments every time.
func genSeeds(n, size int) [][]byte {
	r := rand.New(rand.NewPCG(42, 2026))
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		out[i] = b
	}
	return out
}

// FuzzWholeExperiment: the generator's property on every input (the seed
// corpus in go test: the empty input, the ordinary experiment, and
// generated ones; scripts/fuzz.sh's experiment family fuzzes it).
func FuzzWholeExperiment(f *testing.F) {
	f.Add([]byte{})
	for _, s := range genSeeds(40, 160) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkExperiment(t, genExperiment(newChooser(data)))
	})
}
