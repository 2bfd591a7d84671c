package cluster

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster/admit"
	"github.com/blis-sim/blis/cluster/autoscale"
	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// The scripted scenarios in testdata/scenarios/*.txt drive a cluster step
// by step, as etcd-io/raft's interaction tests drive its nodes. A file is
// a list of blocks:
//
//	command key=value ...
//	----
//	expected output
//
// separated by blank lines; lines starting with # are comments. The
// output is compared with what the command prints; regenerate the files
// after an intended change with
//
//	go test ./cluster -run Scenarios -update
//
// and review the diff: a scenario freezes behaviour, its comments say why
// that behaviour is right.
//
// Commands:
//
//	cluster n=2 routing=least-loaded [scorers=...] [min-share=] [refresh=µs] [refresh.SIGNAL=µs]
//	        [admission=token-bucket capacity= refill=] [admission=rate-limit rate= burst=] [per-tenant=1]
//	        [admission=tenant-quota quota= [quotas=t0,t1,...]] [admission-latency=µs] [routing-latency=µs]
//	        [step=µs arrive=µs depart=µs] [kv-blocks= max-seqs= budget= block=] [k=] [index=]
//	        [slo.CLASS=ttft,tpot,e2e] (targets in µs, 0 = none) [window=µs]
//	        [scale=queue-depth|hpa|oscillator min= max= interval=µs up= down= sustain=µs cooldown=µs
//	         target= provision=µs load=µs warm=µs drain=wait|immediate|redirect]
//	    a new cluster whose instances take a constant step time (default 1000
//	    µs), with 100 µs of API time before queueing and 50 µs after finishing;
//	    window= turns on time windows; scale= puts the instances in one pool
//	    "p" under that autoscaler (hpa scales on queue depth per replica
//	    toward target), one instance per node
//	arrive t= id= prompt= output= [group= prefix=] [tenant=] [class=] [timeout=µs]
//	burst t= first= n= prompt= output= [group= prefix=]
//	stream t= first= n= every=µs prompt= output=
//	    requests offered to the cluster (stream: n requests, one every µs)
//	run [until=µs] [show=scale]
//	    process events (all, or those at or before until) and print every
//	    decision and every request leaving, in order (show=scale: only the
//	    scale actions)
//	status
//	    each instance's live state and what the router sees of it
//	finish
//	    the run's counts, and one line per time window
var update = flag.Bool("update", false, "rewrite testdata/scenarios/*.txt with the outputs the code produces")

// constLatency has fixed step and overhead times, so that every timestamp
// of a scenario can be worked out by hand.
type constLatency struct{ step, arrive, depart int64 }

func (m constLatency) Name() string                    { return "const" }
func (m constLatency) StepTimeUs(*sim.Batch) int64     { return m.step }
func (m constLatency) ArrivalOverheadUs(int64) int64   { return m.arrive }
func (m constLatency) DepartureOverheadUs(int64) int64 { return m.depart }
func (m constLatency) PreemptionGamma() float64        { return sim.DefaultPreemptionGamma }

// scriptSource is a Source fed by the script; it logs every request that
// leaves.
type scriptSource struct {
	reqs  []sim.RequestSpec
	log   *bytes.Buffer
	quiet *bool // run show=: no request lines
}

func (s *scriptSource) Peek() (int64, bool) {
	if len(s.reqs) == 0 {
		return 0, false
	}
	return s.reqs[0].ArrivalUs, true
}

func (s *scriptSource) Next() sim.RequestSpec {
	r := s.reqs[0]
	s.reqs = s.reqs[1:]
	return r
}

func (s *scriptSource) RequestDone(id, at int64, out Outcome) {
	if s.quiet != nil && *s.quiet {
		return
	}
	fmt.Fprintf(s.log, "t=%d done req=%d %s\n", at, id, out)
}

// decisionLog turns decision-trace lines into short lines in the log.
type decisionLog struct {
	log  *bytes.Buffer
	only *string // "": every kind
}

func (d decisionLog) Write(p []byte) (int, error) {
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		return 0, fmt.Errorf("decision line %q: %w", p, err)
	}
	if *d.only != "" && m["type"] != *d.only {
		return len(p), nil
	}
	switch m["type"] {
	case "scale":
		fmt.Fprintf(d.log, "t=%.0f scale pool=%v %v: %.0f -> %.0f (%v)\n", m["t_us"], m["pool"], m["policy"], m["from"], m["to"], m["reason"])
	case "admission":
		if m["admitted"] == true {
			return len(p), nil // admissions are logged only when they reject
		}
		fmt.Fprintf(d.log, "t=%.0f reject req=%.0f (%v)\n", m["t_us"], m["request"], m["reason"])
	case "routing":
		var cands []string
		for _, c := range m["candidates"].([]any) {
			c := c.(map[string]any)
			cands = append(cands, fmt.Sprintf("%v=%.4g", c["instance"], c["score"]))
		}
		fmt.Fprintf(d.log, "t=%.0f route req=%.0f -> %v regret=%.4g [%s]\n", m["t_us"], m["request"], m["chosen"], m["regret"], strings.Join(cands, " "))
	}
	return len(p), nil
}

type scenario struct {
	t   *testing.T
	c   *Sim
	src *scriptSource
	log bytes.Buffer
	// only, when set, is the one decision type run prints (show=), and
	// quiet then silences the request lines.
	only  *string
	quiet *bool
}

func args(fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

func num(t *testing.T, m map[string]string, k string, def int64) int64 {
	v, ok := m[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err, "%s=%s", k, v)
	return n
}

func fnum(t *testing.T, m map[string]string, k string, def float64) float64 {
	v, ok := m[k]
	if !ok {
		return def
	}
	x, err := strconv.ParseFloat(v, 64)
	require.NoError(t, err, "%s=%s", k, v)
	return x
}

func (s *scenario) newCluster(a map[string]string) string {
	t := s.t
	n := int(num(t, a, "n", 2))
	lat := constLatency{step: num(t, a, "step", 1000), arrive: num(t, a, "arrive", 100), depart: num(t, a, "depart", 50)}
	engine := func() sim.Config {
		return sim.Config{
			Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{
				MaxNumSeqs: num(t, a, "max-seqs", 8), MaxBatchedTokens: num(t, a, "budget", 512), ChunkedPrefillEnabled: true,
				BlockSizeTokens: num(t, a, "block", 16), TotalKVBlocksGPU: num(t, a, "kv-blocks", 1000), PrefixCachingEnabled: true,
			}},
			Latency: lat,
			Options: sim.Options{Exhaustive: true},
		}
	}
	var ins []Instance
	scaling := s.scaling(a)
	for i := 0; i < n; i++ {
		in := Instance{ID: InstanceID(i, n), Config: engine()}
		if scaling != nil {
			in.ID, in.Pool = ScaledInstanceID(i), "p"
		}
		ins = append(ins, in)
	}
	if scaling != nil {
		scaling.NewInstance = func(int, int) (sim.Config, error) { return engine(), nil }
	}
	rp := route.Params{PrefixIndexCapacity: int(num(t, a, "index", 0)), MinMatchShare: fnum(t, a, "min-share", 0)}
	if sc, ok := a["scorers"]; ok {
		ws, err := route.ParseScorers(sc)
		require.NoError(t, err)
		rp.Scorers = ws
	}
	policy := a["routing"]
	if policy == "" {
		policy = route.RoundRobinName
	}
	r, err := route.New(policy, n, rp)
	require.NoError(t, err)
	adm := a["admission"]
	if adm == "" {
		adm = admit.AlwaysAdmitName
	}
	ad := admit.Params{TokenBucketCapacity: float64(num(t, a, "capacity", 1000)), TokenBucketRefillRate: float64(num(t, a, "refill", 0)),
		RatePerSecond: fnum(t, a, "rate", 0), Burst: fnum(t, a, "burst", 0), PerTenant: num(t, a, "per-tenant", 0) == 1,
		MaxInFlight: num(t, a, "quota", 0)}
	if qs, ok := a["quotas"]; ok {
		for _, q := range strings.Split(qs, ",") {
			n, err := strconv.ParseInt(q, 10, 64)
			require.NoError(t, err, "quotas=%s", qs)
			ad.TenantMaxInFlight = append(ad.TenantMaxInFlight, n)
		}
	}
	ap, err := admit.New(adm, ad)
	require.NoError(t, err)
	fresh := Uniform(num(t, a, "refresh", 0))
	for s := Signal(0); s < NumSignals; s++ {
		fresh[s] = num(t, a, "refresh."+s.String(), fresh[s])
	}
	var slo [4]SLOTarget
	for _, cl := range []sim.SLOClass{sim.SLORealtime, sim.SLOInteractive, sim.SLOBatch} {
		if v, ok := a["slo."+cl.String()]; ok {
			var x [3]int64
			_, err := fmt.Sscanf(v, "%d,%d,%d", &x[0], &x[1], &x[2])
			require.NoError(t, err, "slo.%s=%s", cl, v)
			slo[cl] = SLOTarget{TTFTUs: x[0], TPOTUs: x[1], E2EUs: x[2]}
		}
	}
	s.log.Reset()
	s.only, s.quiet = new(string), new(bool)
	s.src = &scriptSource{log: &s.log, quiet: s.quiet}
	s.c, err = New(Config{Instances: ins, Admission: ap, Routing: r, Freshness: fresh, SLOTargets: slo,
		AdmissionLatencyUs: num(t, a, "admission-latency", 0), RoutingLatencyUs: num(t, a, "routing-latency", 0),
		Decisions: decisionLog{&s.log, s.only}, CounterfactualK: int(num(t, a, "k", int64(n))), RecordRequests: true,
		WindowUs: num(t, a, "window", 0), Scaling: scaling}, s.src)
	require.NoError(t, err)
	out := fmt.Sprintf("ok: %d instances, %s routing, %s admission", n, r.Name(), ap.Name())
	if scaling != nil {
		ps := scaling.Pools[0]
		out += fmt.Sprintf(", %s autoscaler in [%d, %d]", ps.Policy.Name(), ps.Min, ps.Max)
	}
	if ad.PerTenant {
		out += " per tenant"
	}
	return out
}

// scaling is the cluster command's autoscaler, or nil without scale=.
func (s *scenario) scaling(a map[string]string) *Scaling {
	t := s.t
	name, ok := a["scale"]
	if !ok {
		return nil
	}
	ps := PoolScaling{Name: "p", Min: int(num(t, a, "min", 1)), Max: int(num(t, a, "max", 4)), IntervalUs: num(t, a, "interval", 15_000),
		GPUsPerReplica: 1, GPUsPerNode: 1, ProvisionMinUs: num(t, a, "provision", 0), ProvisionMaxUs: num(t, a, "provision", 0),
		LoadUs: num(t, a, "load", 0), WarmUs: num(t, a, "warm", 0), NodeIdleUs: num(t, a, "idle", 0), PricePerGPUHour: 1}
	switch name {
	case "queue-depth":
		ps.Policy = autoscale.NewThreshold(name, autoscale.ThresholdConfig{Metric: autoscale.MetricQueueDepth, Up: fnum(t, a, "up", 5),
			Down: fnum(t, a, "down", 0.5), Step: 1, SustainUs: num(t, a, "sustain", 0), CooldownUs: num(t, a, "cooldown", 0)})
	case "hpa":
		c := autoscale.DefaultHPA(autoscale.MetricQueueDepth, fnum(t, a, "target", 5))
		c.UpPeriodUs, c.DownPeriodUs, c.DownWindowUs = ps.IntervalUs, ps.IntervalUs, num(t, a, "down-window", 20*ps.IntervalUs)
		ps.Policy = autoscale.NewHPA(c)
	case "oscillator":
		ps.Policy = &autoscale.Oscillator{Step: 1}
	default:
		t.Fatalf("scale=%s: not a policy of the scenarios", name)
	}
	if d, ok := a["drain"]; ok {
		dr, err := ParseDrain(d)
		require.NoError(t, err)
		ps.Drain = dr
	}
	return &Scaling{Pools: []PoolScaling{ps}, RNG: sim.NewRNG(1), OscillationWindowUs: 20 * ps.IntervalUs}
}

func (s *scenario) request(a map[string]string, id, at int64) sim.RequestSpec {
	r := sim.RequestSpec{ID: id, ArrivalUs: at, PromptTokens: num(s.t, a, "prompt", 100), OutputTokens: num(s.t, a, "output", 4),
		PrefixGroup: int32(num(s.t, a, "group", 0)), PrefixTokens: num(s.t, a, "prefix", 0), Tenant: int32(num(s.t, a, "tenant", 0)),
		TimeoutUs: num(s.t, a, "timeout", 0)}
	if c, ok := a["class"]; ok {
		cl, err := sim.ParseSLOClass(c)
		require.NoError(s.t, err)
		r.SLOClass = cl
	}
	return r
}

func (s *scenario) exec(line string) string {
	t := s.t
	fields := strings.Fields(line)
	a := args(fields[1:])
	switch fields[0] {
	case "cluster":
		return s.newCluster(a)
	case "arrive":
		s.src.reqs = append(s.src.reqs, s.request(a, num(t, a, "id", 0), num(t, a, "t", 0)))
		return "ok"
	case "burst":
		first, at := num(t, a, "first", 0), num(t, a, "t", 0)
		for i := int64(0); i < num(t, a, "n", 1); i++ {
			s.src.reqs = append(s.src.reqs, s.request(a, first+i, at))
		}
		return "ok"
	case "stream":
		first, at, every := num(t, a, "first", 0), num(t, a, "t", 0), num(t, a, "every", 1000)
		for i := int64(0); i < num(t, a, "n", 1); i++ {
			s.src.reqs = append(s.src.reqs, s.request(a, first+i, at+i*every))
		}
		return "ok"
	case "run":
		s.log.Reset()
		*s.only = a["show"]
		*s.quiet = *s.only != ""
		defer func() { *s.only, *s.quiet = "", false }()
		var err error
		if u, ok := a["until"]; ok {
			until, perr := strconv.ParseInt(u, 10, 64)
			require.NoError(t, perr)
			err = s.c.RunUntil(until)
		} else {
			for {
				if _, ok := s.c.NextEventUs(); !ok {
					break
				}
				if err = s.c.Step(); err != nil {
					break
				}
			}
		}
		require.NoError(t, err)
		out := strings.TrimSpace(s.log.String())
		if out == "" {
			out = "(nothing)"
		}
		return out + fmt.Sprintf("\nclock=%d", s.c.Now())
	case "status":
		var b strings.Builder
		v := s.c.RouterView()
		for i := 0; i < s.c.NumInstances(); i++ {
			st := s.c.InstanceStatus(i)
			fmt.Fprintf(&b, "%s live: queue=%d batch=%d free=%d/%d kv=%.3f hit=%.3f | router sees: queue=%d batch=%d in-flight=%d free=%d kv=%.3f hit=%.3f\n",
				s.c.ids[i], st.QueueDepth, st.BatchSize, st.FreeKVBlocks, st.TotalKVBlocks, st.KVUtilization, st.PrefixCacheHitRate,
				v.QueueDepth[i], v.BatchSize[i], v.InFlight[i], v.FreeKVBlocks[i], v.KVUtilization[i], v.CacheHitRate[i])
		}
		return strings.TrimSpace(b.String())
	case "finish":
		res, err := s.c.Finish()
		require.NoError(t, err)
		q := res.Requests
		var b strings.Builder
		fmt.Fprintf(&b, "arrived=%d admitted=%d rejected=%d routed=%d completed=%d dropped=%d", q.Arrived, q.Admitted, q.Rejected,
			q.Routed, q.Completed, q.DroppedUnservable)
		if q.TimedOut > 0 {
			fmt.Fprintf(&b, " timed-out=%d", q.TimedOut)
		}
		b.WriteByte('\n')
		fmt.Fprintf(&b, "in the system: awaiting-routing=%d in-transit=%d in-api=%d queued=%d running=%d\n",
			q.AwaitingRouting, q.InTransit, q.StillInAPI, q.StillQueued, q.StillRunning)
		for _, r := range q.RejectedBy {
			fmt.Fprintf(&b, "rejected %q: %d\n", r.Reason, r.Count)
		}
		for _, in := range res.Instances {
			fmt.Fprintf(&b, "%s routed=%d completed=%d\n", in.ID, in.Routed, in.Metrics.Requests.Completed)
		}
		for _, c := range res.PerSLOClass {
			fmt.Fprintf(&b, "class %s arrived=%d completed=%d rejected=%d", c.Class, c.Arrived, c.Completed, c.Rejected)
			if c.TimedOut > 0 {
				fmt.Fprintf(&b, " timed-out=%d", c.TimedOut)
			}
			if a := c.SLO; a != nil {
				fmt.Fprintf(&b, " slo: finished=%d met=%d attainment=%.4f", a.Finished, a.Met, a.Attainment)
			}
			b.WriteByte('\n')
		}
		if a := res.SLO; a != nil {
			fmt.Fprintf(&b, "slo: finished=%d met=%d attainment=%.4f\n", a.Finished, a.Met, a.Attainment)
		}
		if f := res.Fairness; f != nil {
			fmt.Fprintf(&b, "jain=%.4f\n", f.JainIndex)
		}
		if f := res.Fleet; f != nil && len(f.Pools) > 0 && f.Pools[0].Policy != "none" {
			p := f.Pools[0]
			var states []string
			for st := StatePending; st < StateTerminated; st++ {
				if v, ok := p.ReplicaSeconds[st.String()]; ok {
					states = append(states, fmt.Sprintf("%s=%.3f", st, v))
				}
			}
			fmt.Fprintf(&b, "fleet: ups=%d downs=%d oscillations=%d created=%d terminated=%d peak=%d nodes=%d replica-seconds: %s\n",
				p.ScaleUps, p.ScaleDowns, p.Oscillations, p.Created, p.Terminated, p.PeakReplicas, p.Nodes, strings.Join(states, " "))
		}
		for _, w := range res.Windows {
			ttft := "-"
			if w.Completed > 0 {
				ttft = fmt.Sprintf("%d/%d", w.TTFTP50Us, w.TTFTP99Us)
			}
			fmt.Fprintf(&b, "window [%d,%d) arrived=%d admitted=%d rejected=%d completed=%d dropped=%d timed-out=%d tokens=%d ttft-p50/p99=%s | queue=%d running=%d kv=%.3f/%.3f in-flight=%d",
				w.StartUs, w.EndUs, w.Arrived, w.Admitted, w.Rejected, w.Completed, w.Dropped, w.TimedOut, w.OutputTokens, ttft,
				w.QueueDepth, w.Running, w.KVUtilMean, w.KVUtilMax, w.InFlight)
			if res.Fleet != nil && res.Fleet.Pools[0].Policy != "none" {
				fmt.Fprintf(&b, " | ready=%d starting=%d draining=%d", w.ReplicasReady, w.ReplicasStarting, w.ReplicasDraining)
			}
			b.WriteByte('\n')
		}
		return strings.TrimSpace(b.String())
	}
	t.Fatalf("unknown command %q", fields[0])
	return ""
}

// block is one command of a scenario file.
type block struct {
	comments []string
	cmd      string
	want     string
}

func parseScenario(t *testing.T, data string) []block {
	var out []block
	lines := strings.Split(data, "\n")
	for i := 0; i < len(lines); {
		var b block
		for i < len(lines) && (strings.TrimSpace(lines[i]) == "" || strings.HasPrefix(lines[i], "#")) {
			if strings.HasPrefix(lines[i], "#") {
				b.comments = append(b.comments, lines[i])
			}
			i++
		}
		if i >= len(lines) {
			break
		}
		b.cmd = lines[i]
		i++
		require.Less(t, i, len(lines), "command %q has no ----", b.cmd)
		require.Equal(t, "----", lines[i], "after command %q", b.cmd)
		i++
		var want []string
		for i < len(lines) && lines[i] != "" {
			want = append(want, lines[i])
			i++
		}
		b.want = strings.Join(want, "\n")
		out = append(out, b)
	}
	return out
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	sort.Strings(files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			s := &scenario{t: t}
			var out strings.Builder
			for i, b := range parseScenario(t, string(data)) {
				got := s.exec(b.cmd)
				if i > 0 {
					out.WriteString("\n")
				}
				for _, c := range b.comments {
					out.WriteString(c + "\n")
				}
				out.WriteString(b.cmd + "\n----\n" + got + "\n")
				if !*update {
					require.Equal(t, b.want, got, "%s: %s", f, b.cmd)
				}
			}
			if *update {
				require.NoError(t, os.WriteFile(f, []byte(out.String()), 0o644))
			}
		})
	}
}

// TestDecisionTraceGolden freezes the decision trace's JSON: field names,
// order and number formatting (testdata/decisions.golden.jsonl; -update
// rewrites it). Each line must also be valid JSON with the documented
// fields.
func TestDecisionTraceGolden(t *testing.T) {
	var buf bytes.Buffer
	lat := constLatency{step: 1000, arrive: 100, depart: 50}
	var ins []Instance
	for i := 0; i < 3; i++ {
		ins = append(ins, Instance{ID: InstanceID(i, 3), Config: sim.Config{
			Engine: sim.EngineConfig{VLLMKnobs: physics.VLLMKnobs{MaxNumSeqs: 4, MaxBatchedTokens: 512, ChunkedPrefillEnabled: true,
				BlockSizeTokens: 16, TotalKVBlocksGPU: 200, PrefixCachingEnabled: true}},
			Latency: lat,
		}})
	}
	r, err := route.New(route.WeightedName, 3, route.Params{})
	require.NoError(t, err)
	ap, err := admit.New(admit.TokenBucketName, admit.Params{TokenBucketCapacity: 600, TokenBucketRefillRate: 1000})
	require.NoError(t, err)
	var reqs []sim.RequestSpec
	for i := int64(0); i < 8; i++ {
		reqs = append(reqs, sim.RequestSpec{ID: i, ArrivalUs: i * 700, PromptTokens: 100 + 40*i, OutputTokens: 3, PrefixGroup: int32(1 + i%2), PrefixTokens: 64, Tenant: int32(i % 2)})
	}
	c, err := New(Config{Instances: ins, Admission: ap, Routing: r, Decisions: &buf, CounterfactualK: 2, Freshness: Uniform(1500)}, NewSliceSource(reqs))
	require.NoError(t, err)
	_, err = c.Run()
	require.NoError(t, err)
	const golden = "testdata/decisions.golden.jsonl"
	if *update {
		require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), buf.String(), "regenerate with go test ./cluster -run DecisionTraceGolden -update")
	var admissions, routings, rejections int
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		for _, k := range []string{"t_us", "type", "request", "tenant", "policy"} {
			require.Contains(t, m, k)
		}
		switch m["type"] {
		case "admission":
			admissions++
			if m["admitted"] == false {
				rejections++
				require.Contains(t, m, "reason")
			}
		case "routing":
			routings++
			require.Equal(t, 0.0, m["regret"], "weighted chooses its best score")
			cands := m["candidates"].([]any)
			require.Len(t, cands, 2, "k = 2")
			for _, c := range cands {
				for _, k := range []string{"instance", "score", "queue_depth", "batch_size", "in_flight", "kv_utilization", "free_kv_blocks", "cache_hit_rate", "scorers"} {
					require.Contains(t, c, k)
				}
			}
		}
	}
	require.Equal(t, 8, admissions)
	require.Greater(t, rejections, 0, "the bucket rejects some")
	require.Equal(t, admissions-rejections, routings)
}
