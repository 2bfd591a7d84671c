package cluster

import (
	"fmt"
	"strings"

	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/sim"
)

// Signal is an instance-reported signal a router reads (INV-7's
// "instance-reported" tier). In-flight counts and the prefix index are
// router-local and always fresh; they are not Signals.
type Signal uint8

const (
	SigQueueDepth Signal = iota
	SigBatchSize
	SigKVUtilization
	SigFreeKVBlocks
	SigCacheHitRate
	NumSignals
)

var signalNames = [NumSignals]string{"queue_depth", "batch_size", "kv_utilization", "free_kv_blocks", "cache_hit_rate"}

// String is the signal's key in a deployment file's observability section.
func (s Signal) String() string { return signalNames[s] }

// ParseSignal reads a signal name.
func ParseSignal(name string) (Signal, error) {
	for i, n := range signalNames {
		if n == name {
			return Signal(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not an instance signal; use one of %s", name, strings.Join(signalNames[:], ", "))
}

// Freshness is each signal's refresh interval in µs: 0 reads the instance
// at the moment of every routing decision (Immediate); D > 0 reads the
// value of the last scrape, taken at every multiple of D (Periodic), as a
// router scraping vLLM's /metrics every D would. Signals with the same
// interval are scraped together, as one /metrics request returns them all.
type Freshness [NumSignals]int64

// Uniform is every signal refreshed every intervalUs (0: all immediate):
// --snapshot-refresh-interval.
func Uniform(intervalUs int64) Freshness {
	var f Freshness
	for i := range f {
		f[i] = intervalUs
	}
	return f
}

// Validate checks that no interval is negative.
func (f Freshness) Validate() error {
	for s, d := range f {
		if d < 0 {
			return fmt.Errorf("%s refresh interval must be >= 0 µs, got %d", Signal(s), d)
		}
	}
	return nil
}

// scrapeGroup is the signals sharing one refresh interval.
type scrapeGroup struct {
	interval int64
	last     int64 // time of the last scrape
	next     int64 // the next boundary
	signals  []Signal
}

// snapshots holds the published (last scraped) values of the periodic
// signals, per instance.
type snapshots struct {
	fresh     Freshness
	groups    []scrapeGroup
	immediate bool // some signal is read live
	pub       []sim.Status
}

func newSnapshots(f Freshness, n int) *snapshots {
	s := &snapshots{fresh: f, pub: make([]sim.Status, n)}
	for sig, d := range f {
		if d == 0 {
			s.immediate = true
			continue
		}
		found := false
		for g := range s.groups {
			if s.groups[g].interval == d {
				s.groups[g].signals = append(s.groups[g].signals, Signal(sig))
				found = true
			}
		}
		if !found {
			s.groups = append(s.groups, scrapeGroup{interval: d, next: d, signals: []Signal{Signal(sig)}})
		}
	}
	return s
}

// grow adds a new instance: its published signals are what it reports
// now (a scrape would have seen it idle).
func (s *snapshots) grow(e *sim.Engine) {
	st := e.Status()
	s.pub = append(s.pub, st)
}

// copySignal copies one signal from a live status into a published one.
func copySignal(dst, src *sim.Status, s Signal) {
	switch s {
	case SigQueueDepth:
		dst.QueueDepth = src.QueueDepth
	case SigBatchSize:
		dst.BatchSize = src.BatchSize
	case SigKVUtilization:
		dst.KVUtilization = src.KVUtilization
	case SigFreeKVBlocks:
		dst.FreeKVBlocks = src.FreeKVBlocks
	case SigCacheHitRate:
		dst.PrefixCacheHitRate = src.PrefixCacheHitRate
	}
}

// scrapeGroup publishes the group's signals of every instance.
func (s *snapshots) scrapeGroup(g *scrapeGroup, engines []*sim.Engine) {
	for i, e := range engines {
		st := e.Status()
		for _, sig := range g.signals {
			copySignal(&s.pub[i], &st, sig)
		}
	}
}

// advance takes the scrapes whose boundaries lie in (last processed time,
// t]. Called before any event at t is processed, it sees the instances as
// they were after every event before t, which is what a scrape at the
// boundary would have seen: nothing changes between events. It reports
// whether it scraped.
func (s *snapshots) advance(t int64, engines []*sim.Engine) bool {
	scraped := false
	for g := range s.groups {
		gr := &s.groups[g]
		if t < gr.next {
			continue
		}
		s.scrapeGroup(gr, engines)
		gr.last = t - t%gr.interval
		gr.next = gr.last + gr.interval
		scraped = true
	}
	return scraped
}

// start publishes the initial scrape, at time 0.
func (s *snapshots) start(engines []*sim.Engine) {
	for g := range s.groups {
		s.scrapeGroup(&s.groups[g], engines)
	}
}

// fill writes the view of every instance: immediate signals from the live
// status, periodic ones from the last scrape, in-flight from the router.
func (s *snapshots) fill(v *route.View, engines []*sim.Engine, inflight []int64, now int64) {
	v.NowUs = now
	for i, e := range engines {
		s.fillOne(v, e, inflight, i)
	}
}

// fillOne writes instance i's view, engine e's.
func (s *snapshots) fillOne(v *route.View, e *sim.Engine, inflight []int64, i int) {
	if !v.OK(i) {
		// Not routable (starting, draining, terminated): no policy
		// reads it, and an autoscaled day leaves hundreds of these.
		return
	}
	p := &s.pub[i]
	if s.immediate {
		st := e.Status()
		for sig, d := range s.fresh {
			if d == 0 {
				copySignal(p, &st, Signal(sig))
			}
		}
	}
	v.QueueDepth[i] = p.QueueDepth
	v.BatchSize[i] = p.BatchSize
	v.KVUtilization[i] = p.KVUtilization
	v.FreeKVBlocks[i] = p.FreeKVBlocks
	v.CacheHitRate[i] = p.PrefixCacheHitRate
	v.InFlight[i] = inflight[i]
}

// age is how old signal sig's published value is at now (0 for an
// immediate signal).
func (s *snapshots) age(sig Signal, now int64) int64 {
	d := s.fresh[sig]
	if d == 0 {
		return 0
	}
	for g := range s.groups {
		if s.groups[g].interval == d {
			return now - s.groups[g].last
		}
	}
	return 0
}
