package experiment

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/inputfile"
	"github.com/blis-sim/blis/internal/yamlfile"
	"github.com/blis-sim/blis/policy"
)

// A deployment file (blis run --deployment FILE) is the earlier form of an
// experiment's deployment: pools, with the cluster's admission, routing
// and signal freshness beside them.
//
//	pools:                          # an experiment's deployment.pools, plus
//	  - name: h100                  # four legacy keys: scheduler, priority,
//	    replicas: 4                 # priority_base, priority_age_weight
//	    scheduler: fcfs             # (every pool the same: policies.scheduler)
//	admission:
//	  policy: token-bucket          # policies.admission.type
//	  token_bucket_capacity: 100000 # policies.admission.params.capacity
//	  token_bucket_refill_rate: 50000 # .params.refill_rate
//	  latency_us: 0                 # deployment.router.admission_latency_us
//	routing:
//	  policy: weighted              # policies.routing.type
//	  scorers: prefix-affinity:3,queue-depth:2,kv-utilization:2 # .params.scorers
//	  latency_us: 0                 # deployment.router.routing_latency_us
//	  prefix_index_capacity: 10000  # .params.prefix_index_capacity
//	  snapshot_refresh_interval_us: 0 # every signal's refresh
//	observability:                  # per signal, overriding the line above
//	  queue_depth: immediate        # or a refresh interval in µs
//
// LoadDeployment reads one into a draft, key by key; errors about its
// values name its file, line and keys.

type legacyYAML struct {
	Pools         []legacyPoolYAML     `yaml:"pools"`
	Admission     *legacyAdmissionYAML `yaml:"admission"`
	Routing       *legacyRoutingYAML   `yaml:"routing"`
	Observability *legacyObsYAML       `yaml:"observability"`
}

type legacyPoolYAML struct {
	deploy.PoolYAML   `yaml:",inline"`
	Scheduler         *string  `yaml:"scheduler"`
	Priority          *string  `yaml:"priority"`
	PriorityBase      *float64 `yaml:"priority_base"`
	PriorityAgeWeight *float64 `yaml:"priority_age_weight"`
}

type legacyAdmissionYAML struct {
	Policy                *string  `yaml:"policy"`
	TokenBucketCapacity   *float64 `yaml:"token_bucket_capacity"`
	TokenBucketRefillRate *float64 `yaml:"token_bucket_refill_rate"`
	LatencyUs             *int64   `yaml:"latency_us"`
}

type legacyRoutingYAML struct {
	Policy              *string `yaml:"policy"`
	Scorers             *string `yaml:"scorers"`
	LatencyUs           *int64  `yaml:"latency_us"`
	PrefixIndexCapacity *int    `yaml:"prefix_index_capacity"`
	RefreshUs           *int64  `yaml:"snapshot_refresh_interval_us"`
}

type legacyObsYAML struct {
	QueueDepth    *string `yaml:"queue_depth"`
	BatchSize     *string `yaml:"batch_size"`
	KVUtilization *string `yaml:"kv_utilization"`
	FreeKVBlocks  *string `yaml:"free_kv_blocks"`
	CacheHitRate  *string `yaml:"cache_hit_rate"`
}

var legacyMappings = func() map[string]yamlfile.Mapping {
	m := map[string]yamlfile.Mapping{
		"experiment.legacyYAML":          {What: "the top level", Keys: reflect.TypeOf(legacyYAML{})},
		"experiment.legacyPoolYAML":      {What: "a pool", Keys: reflect.TypeOf(legacyPoolYAML{})},
		"experiment.legacyAdmissionYAML": {What: "admission", Keys: reflect.TypeOf(legacyAdmissionYAML{})},
		"experiment.legacyRoutingYAML":   {What: "routing", Keys: reflect.TypeOf(legacyRoutingYAML{})},
		"experiment.legacyObsYAML":       {What: "observability", Keys: reflect.TypeOf(legacyObsYAML{})},
	}
	for k, v := range deploy.Mappings {
		m[k] = v
	}
	return m
}()

// LoadDeployment reads a deployment file into the draft (blis run
// --deployment): its pools become the deployment's, its admission and
// routing the policies', its latencies and freshness the router's. A
// draft read from an experiment file that has a deployment refuses it.
func (d *Draft) LoadDeployment(path string) error {
	data, err := inputfile.Read(path)
	if err != nil {
		return err
	}
	return d.ParseDeployment(data, path)
}

// ParseDeployment is LoadDeployment for a file's bytes.
func (d *Draft) ParseDeployment(data []byte, src string) error {
	if d.f.Deployment != nil && d.config != "" {
		return fmt.Errorf("%s: the experiment file %s has a deployment already; give one or the other", src, d.config)
	}
	var y legacyYAML
	doc, err := yamlfile.DecodeChecked(data, src, &y, legacyMappings, func(n *yaml.Node) error { return checkValues(n, "", legacyKey) })
	if err != nil {
		return err
	}
	if len(y.Pools) == 0 {
		return doc.Errorf("pools", "at least one pool is required")
	}
	keys := map[string]string{} // experiment key -> the file's
	dp := &deploymentYAML{}
	total := 0
	names := map[string]bool{}
	var sched, prio *legacyPoolYAML
	var schedAt, prioAt int
	for i := range y.Pools {
		p := &y.Pools[i]
		at := fmt.Sprintf("pools[%d]", i)
		// Paths are the file's folder's before anything reads them.
		resolvePool(&p.InstanceYAML, filepath.Dir(src))
		pool, err := p.PoolYAML.Pool(i, "")
		if err != nil {
			return placeFile(doc, at, err)
		}
		if names[pool.Name] {
			return doc.Errorf(at+".name", "pool name %q is used twice", clip.String(pool.Name))
		}
		names[pool.Name] = true
		total += pool.Replicas
		if total > deploy.MaxInstances {
			return doc.Errorf(at+".replicas", "the deployment has more than %d instances", deploy.MaxInstances)
		}
		dp.Pools = append(dp.Pools, p.PoolYAML)
		keys["deployment."+at] = at
		// Every pool must run the same scheduler and priority now: the
		// experiment's policies (docs/experiment.md).
		if p.Scheduler != nil || sched != nil {
			if sched == nil {
				sched, schedAt = p, i
			} else if ps, ss := deref(p.Scheduler, "fcfs"), deref(sched.Scheduler, "fcfs"); ps != ss {
				return doc.Errorf(at+".scheduler", "%q differs from pools[%d]'s %q; every pool runs the experiment's one scheduler (policies.scheduler)", clip.String(ps), schedAt, clip.String(ss))
			}
		}
		if p.Priority != nil || p.PriorityBase != nil || p.PriorityAgeWeight != nil || prio != nil {
			if prio == nil {
				prio, prioAt = p, i
			} else if !samePriority(p, prio) {
				return doc.Errorf(at+".priority", "differs from pools[%d]'s; every pool runs the experiment's one priority policy (policies.priority)", prioAt)
			}
		}
	}
	d.f.Deployment = dp
	if d.f.Policies == nil {
		d.f.Policies = &policy.FileYAML{}
	}
	pol := d.f.Policies
	if sched != nil {
		pol.Scheduler = &policy.Raw{Type: deref(sched.Scheduler, "fcfs")}
		keys["policies.scheduler"] = fmt.Sprintf("pools[%d].scheduler", schedAt)
	}
	if prio != nil {
		at := fmt.Sprintf("pools[%d].", prioAt)
		pol.Priority = &policy.Raw{Type: deref(prio.Priority, "constant")}
		keys["policies.priority"] = at + "priority"
		if prio.PriorityBase != nil {
			setParam(&pol.Priority.Params, "base", fmtFloat(*prio.PriorityBase))
			keys["policies.priority.params.base"] = at + "priority_base"
		}
		if prio.PriorityAgeWeight != nil {
			setParam(&pol.Priority.Params, "age_weight", fmtFloat(*prio.PriorityAgeWeight))
			keys["policies.priority.params.age_weight"] = at + "priority_age_weight"
		}
	}
	router := &routerYAML{}
	if a := y.Admission; a != nil {
		pol.Admission = &policy.Raw{Type: deref(a.Policy, policy.Names(policy.Admission)[0])}
		keys["policies.admission"] = "admission"
		keys["policies.admission.type"] = "admission.policy"
		if a.TokenBucketCapacity != nil {
			setParam(&pol.Admission.Params, "capacity", fmtFloat(*a.TokenBucketCapacity))
			keys["policies.admission.params.capacity"] = "admission.token_bucket_capacity"
		}
		if a.TokenBucketRefillRate != nil {
			setParam(&pol.Admission.Params, "refill_rate", fmtFloat(*a.TokenBucketRefillRate))
			keys["policies.admission.params.refill_rate"] = "admission.token_bucket_refill_rate"
		}
		if a.LatencyUs != nil {
			router.AdmissionLatencyUs = a.LatencyUs
			keys["deployment.router.admission_latency_us"] = "admission.latency_us"
		}
	}
	if r := y.Routing; r != nil {
		pol.Routing = &policy.Raw{Type: deref(r.Policy, policy.Names(policy.Routing)[0])}
		keys["policies.routing"] = "routing"
		keys["policies.routing.type"] = "routing.policy"
		if r.Scorers != nil {
			m, err := weightMap(*r.Scorers)
			if err != nil {
				return doc.Errorf("routing.scorers", "%v", err)
			}
			setParam(&pol.Routing.Params, "scorers", m)
			keys["policies.routing.params.scorers"] = "routing.scorers"
		}
		if r.PrefixIndexCapacity != nil {
			setParam(&pol.Routing.Params, "prefix_index_capacity", fmt.Sprint(*r.PrefixIndexCapacity))
			keys["policies.routing.params.prefix_index_capacity"] = "routing.prefix_index_capacity"
		}
		if r.LatencyUs != nil {
			router.RoutingLatencyUs = r.LatencyUs
			keys["deployment.router.routing_latency_us"] = "routing.latency_us"
		}
		if r.RefreshUs != nil {
			if *r.RefreshUs < 0 {
				return doc.Errorf("routing.snapshot_refresh_interval_us", "must be >= 0 µs, got %d", *r.RefreshUs)
			}
			router.SnapshotRefreshUs = &refreshYAML{}
			for s, p := range router.SnapshotRefreshUs.signals() {
				*p = r.RefreshUs
				keys["deployment.router.snapshot_refresh_us."+cluster.Signal(s).String()] = "routing.snapshot_refresh_interval_us"
			}
		}
	}
	if o := y.Observability; o != nil {
		if router.SnapshotRefreshUs == nil {
			router.SnapshotRefreshUs = &refreshYAML{}
		}
		dst := router.SnapshotRefreshUs.signals()
		for s, v := range []*string{o.QueueDepth, o.BatchSize, o.KVUtilization, o.FreeKVBlocks, o.CacheHitRate} {
			if v == nil {
				continue
			}
			key := "observability." + cluster.Signal(s).String()
			us, err := parseRefresh(*v)
			if err != nil {
				return doc.Errorf(key, "%v", err)
			}
			*dst[s] = &us
			keys["deployment.router.snapshot_refresh_us."+cluster.Signal(s).String()] = key
		}
	}
	if *router != (routerYAML{}) {
		dp.Router = router
	}
	d.legacy = src
	d.sources = append(d.sources, source{doc: doc, lookup: func(k string) (string, bool) {
		for a := k; a != ""; {
			if fk, ok := keys[a]; ok {
				if a == k || !strings.HasPrefix(k, "deployment.pools") {
					return fk, true
				}
				return strings.TrimPrefix(k, "deployment."), true
			}
			i := strings.LastIndexAny(a, ".[")
			if i < 0 {
				break
			}
			a = a[:i]
		}
		return "", false
	}})
	return nil
}

// legacyKey is the experiment key of a deployment file's key, for its
// declaration: a pool's keys are the experiment's pools', the admission's
// and routing's latencies and refresh the router's.
func legacyKey(k string) string {
	switch k {
	case "admission.latency_us":
		return "deployment.router.admission_latency_us"
	case "routing.latency_us":
		return "deployment.router.routing_latency_us"
	case "routing.snapshot_refresh_interval_us":
		return "deployment.router.snapshot_refresh_us.queue_depth"
	case "routing.prefix_index_capacity":
		return "legacy.prefix_index_capacity"
	}
	if strings.HasPrefix(k, "pools[") {
		return "deployment." + k
	}
	return ""
}

// Legacy is the deployment file the draft read, or "".
func (d *Draft) Legacy() string { return d.legacy }

// placeFile places a pool's *deploy.FieldError in a file under at.
func placeFile(doc *yamlfile.Doc, at string, err error) error {
	if fe, ok := err.(*deploy.FieldError); ok {
		keys := make([]string, len(fe.Fields))
		for i, f := range fe.Fields {
			keys[i] = at + "." + f
		}
		return fmt.Errorf("%s:%d: %s: %w", doc.Source, doc.Line(keys[0]), strings.Join(keys, ", "), fe.Err)
	}
	return fmt.Errorf("%s: %s: %w", doc.Source, at, err)
}

func samePriority(a, b *legacyPoolYAML) bool {
	f := func(p *float64, def float64) float64 {
		if p == nil {
			return def
		}
		return *p
	}
	return deref(a.Priority, "constant") == deref(b.Priority, "constant") &&
		f(a.PriorityBase, 0) == f(b.PriorityBase, 0) && f(a.PriorityAgeWeight, 1) == f(b.PriorityAgeWeight, 1)
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// parseRefresh reads a legacy signal refresh: "immediate" or 0 for a
// read at every decision, else an interval in µs.
func parseRefresh(s string) (int64, error) {
	if s == "immediate" {
		return 0, nil
	}
	var us int64
	if _, err := fmt.Sscan(s, &us); err != nil || us < 0 || fmt.Sprint(us) != s {
		return 0, fmt.Errorf("%q must be immediate or a refresh interval in µs >= 0", clip.String(s))
	}
	return us, nil
}
