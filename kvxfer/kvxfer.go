// Package kvxfer models KV-cache transfers between instances of a fleet
// (prefill to decode, docs/disaggregation.md): each transfer moves a
// number of bytes through the ports it uses (the sending instance's egress
// and the receiving instance's ingress, over RDMA NICs between nodes or
// NVLink within one), then completes a fixed latency later.
//
// Sharing: the transfers flowing through a port share its bandwidth
// equally, and a transfer flows at the smallest share among its ports.
// Rates are recomputed whenever a transfer starts or stops flowing, so two
// transfers that overlap on one port each run at half rate for exactly
// the overlap (TestOverlapHalvesTheRate). This is per-port fair sharing,
// not max-min fairness across the network: a transfer held back by a busy
// port does not give its unused share of another port to the others.
//
// Time is integer microseconds, as everywhere in the simulator; a
// transfer's end is rounded up to the microsecond it falls in, and no
// transfer flows longer than units.MaxDurationUs (2^40 µs, 12.7 days) from
// its start: one that would (a link of 1e-15 GB/s) ends its flow then and
// is counted (Clamped; TestHopelessLinkIsClamped). The model
// is a pure core: the caller (the cluster loop) starts transfers at its
// clock and asks when the next one ends. It is not safe for concurrent
// use.
package kvxfer

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/internal/units"
)

// Port is an endpoint's link, as AddPort returned it.
type Port int32

// Network is the ports and the transfers in progress.
type Network struct {
	latencyUs int64
	caps      []float64 // bytes per µs, by port
	users     []int32   // transfers flowing through each port
	xfers     []xfer    // in progress, in start order
	t         int64     // the flows are accounted up to t
	done      []int64
	clamped   int64 // transfers whose flow was cut to units.MaxDurationUs
}

type xfer struct {
	id        int64
	ports     [2]Port // -1: unused
	remaining float64 // bytes still to flow at t
	rate      float64 // bytes per µs since t
	start     int64   // when it started
	endAt     int64   // when its last byte flows at that rate
	flowed    bool    // its last byte flowed, at endAt
	clamped   bool    // its flow time was cut to units.MaxDurationUs (counted once)
}

// New is a network whose transfers complete latencyUs (>= 0) after their
// last byte.
func New(latencyUs int64) (*Network, error) {
	if latencyUs < 0 || latencyUs > units.MaxDurationUs {
		return nil, fmt.Errorf("kvxfer: latency must be within [0, %d] µs, got %d", units.MaxDurationUs, latencyUs)
	}
	return &Network{latencyUs: latencyUs}, nil
}

// AddPort adds a port of bytesPerSecond (> 0, finite).
func (n *Network) AddPort(bytesPerSecond float64) (Port, error) {
	if !(bytesPerSecond > 0) || math.IsInf(bytesPerSecond, 0) {
		return 0, fmt.Errorf("kvxfer: a port's bandwidth must be > 0 and finite, got %v B/s", bytesPerSecond)
	}
	n.caps = append(n.caps, bytesPerSecond/1e6)
	n.users = append(n.users, 0)
	return Port(len(n.caps) - 1), nil
}

// Clamped is the number of transfers whose flow would have lasted longer
// than units.MaxDurationUs from their start, and was cut there.
func (n *Network) Clamped() int64 { return n.clamped }

// Active is the number of transfers in progress (flowing or in their
// latency).
func (n *Network) Active() int { return len(n.xfers) }

// Flowing is the number of transfers using port p now.
func (n *Network) Flowing(p Port) int { return int(n.users[p]) }

// Start starts transfer id of bytes (>= 0) at now (not before the last
// call's time) through ports a and b (b may be a again, or -1 for none).
func (n *Network) Start(now, id int64, bytes float64, a, b Port) error {
	if now < n.t {
		return fmt.Errorf("kvxfer: transfer %d starts at %d µs, before %d", id, now, n.t)
	}
	if !(bytes >= 0) || math.IsInf(bytes, 0) {
		return fmt.Errorf("kvxfer: transfer %d: %v bytes", id, bytes)
	}
	for _, p := range [2]Port{a, b} {
		if p != -1 && (p < 0 || int(p) >= len(n.caps)) {
			return fmt.Errorf("kvxfer: transfer %d: no port %d", id, p)
		}
	}
	if b == a {
		b = -1
	}
	n.settle(now)
	x := xfer{id: id, ports: [2]Port{a, b}, remaining: bytes, start: now}
	if bytes == 0 || (a < 0 && b < 0) {
		x.remaining, x.endAt, x.flowed = 0, now, true
	} else {
		n.use(&x, 1)
	}
	n.xfers = append(n.xfers, x)
	n.rerate()
	return nil
}

func (n *Network) use(x *xfer, d int32) {
	for _, p := range x.ports {
		if p >= 0 {
			n.users[p] += d
		}
	}
}

// Next is when the next transfer completes, and false when none is in
// progress.
func (n *Network) Next() (int64, bool) {
	if len(n.xfers) == 0 {
		return 0, false
	}
	first := int64(math.MaxInt64)
	for i := range n.xfers {
		first = min(first, n.xfers[i].endAt)
	}
	return first + n.latencyUs, true
}

// Complete moves the network to now (not before the last call's time)
// and returns the transfers that completed at or before it, in the order
// they completed (ties in start order). The slice is reused by the next
// call.
func (n *Network) Complete(now int64) ([]int64, error) {
	if now < n.t {
		return nil, fmt.Errorf("kvxfer: completing at %d µs, before %d", now, n.t)
	}
	n.settle(now)
	n.done = n.done[:0]
	for {
		first := int64(math.MaxInt64)
		for i := range n.xfers {
			if x := &n.xfers[i]; x.flowed {
				first = min(first, x.endAt)
			}
		}
		if first == math.MaxInt64 || first+n.latencyUs > now {
			break
		}
		kept := n.xfers[:0]
		for _, x := range n.xfers {
			if x.flowed && x.endAt == first {
				n.done = append(n.done, x.id)
				continue
			}
			kept = append(kept, x)
		}
		n.xfers = kept
	}
	return n.done, nil
}

// settle accounts the flows up to to: each time a transfer's last byte
// flows, its ports are freed and the others' rates change from then.
func (n *Network) settle(to int64) {
	for {
		first := int64(math.MaxInt64)
		for i := range n.xfers {
			if x := &n.xfers[i]; !x.flowed {
				first = min(first, x.endAt)
			}
		}
		if first > to {
			break
		}
		n.flow(first)
		for i := range n.xfers {
			if x := &n.xfers[i]; !x.flowed && x.endAt == first {
				x.remaining, x.flowed = 0, true
				n.use(x, -1)
			}
		}
		n.rerate()
	}
	n.flow(to)
}

// flow moves the flowing transfers' bytes from t to to (no end between).
func (n *Network) flow(to int64) {
	if dt := float64(to - n.t); dt > 0 {
		for i := range n.xfers {
			if x := &n.xfers[i]; !x.flowed {
				x.remaining = max(0, x.remaining-x.rate*dt)
			}
		}
	}
	n.t = max(n.t, to)
}

// rerate sets every flowing transfer's rate (its smallest port share) and
// when its last byte will flow at that rate, from t.
func (n *Network) rerate() {
	for i := range n.xfers {
		x := &n.xfers[i]
		if x.flowed {
			continue
		}
		rate := math.Inf(1)
		for _, p := range x.ports {
			if p >= 0 {
				rate = min(rate, n.caps[p]/float64(n.users[p]))
			}
		}
		x.rate = rate
		// A tolerance of a millionth of a µs keeps a whole number of µs
		// whole through the floating-point subtractions of flow.
		d := units.Ceil(x.remaining/rate - 1e-6)
		if limit := x.start + units.MaxDurationUs - n.t; d > limit {
			if !x.clamped {
				x.clamped = true
				n.clamped++
			}
			d = limit
		}
		x.endAt = n.t + max(d, 0)
	}
}
