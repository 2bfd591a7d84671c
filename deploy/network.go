package deploy

import (
	"github.com/blis-sim/blis/cluster"
)

// Network is the deployment's KV-transfer network under prefill/decode
// disaggregation (docs/disaggregation.md): how a prefill instance's KV
// reaches its decode instance.
//
// An instance has one RDMA NIC per GPU (H100 nodes: ConnectX-7, 400 Gb/s,
// one per GPU) and its GPUs' NVLink within its node; vLLM's NIXL connector
// moves each rank's KV shard over that rank's own link, so an instance's
// port is its GPUs' links together. Efficiency is the share of the line
// rate a transfer engine reaches: Mooncake's transfer engine measured
// 87 GB/s over 4×200 Gb/s RoCE (100 GB/s of line rate) and 190 GB/s over
// 8×400 Gb/s (Mooncake, FAST 2025, §5; its transfer-engine docs).
type Network struct {
	// NICBytesPerSec is one NIC's line rate, each direction, bytes/s.
	NICBytesPerSec float64 `json:"nic_bytes_per_s"`
	// Efficiency scales every link's line rate, NVLink's too.
	Efficiency float64 `json:"efficiency"`
	// LatencyUs is a transfer's fixed cost after its last byte: the
	// completion notification and the connector's bookkeeping.
	LatencyUs int64 `json:"latency_us"`
	// AbortTimeoutUs frees a prefill instance's KV that no decode
	// instance pulled by then (vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT,
	// 480 s).
	AbortTimeoutUs int64 `json:"abort_timeout_us"`
}

// Network defaults. 50 GB/s is a 400 Gb/s NIC's line rate; 0.87 Mooncake's
// measured share of 4×200 Gb/s; 20 µs an assumption (an RDMA write's
// completion takes a few µs, the connector's notification through its
// side channel a few more; docs/disaggregation.md says why it is not a
// measurement); 480 s vLLM's default abort timeout (vllm/envs.py).
const (
	DefaultNICGBPerSec    = 50
	DefaultNetEfficiency  = 0.87
	DefaultNetLatencyUs   = 20
	DefaultAbortTimeoutUs = 480_000_000
)

// DefaultNetwork is the defaults above.
func DefaultNetwork() Network {
	return Network{NICBytesPerSec: DefaultNICGBPerSec * 1e9, Efficiency: DefaultNetEfficiency, LatencyUs: DefaultNetLatencyUs, AbortTimeoutUs: DefaultAbortTimeoutUs}
}

// Pool roles (cluster.Role's names).
const (
	RoleBoth    = "both"
	RolePrefill = "prefill"
	RoleDecode  = "decode"
)

// Disaggregated reports whether a pool of d only prefills or only decodes.
func (d *Deployment) Disaggregated() bool {
	for _, p := range d.Pools {
		if p.Role != RoleBoth && p.Role != "" {
			return true
		}
	}
	return false
}

// PDPools are every pool's role and transfer physics for cluster.Disagg:
// the KV bytes of a token on all the pool's ranks (the model's, at its TP:
// a prefill instance sends every rank's shard), the pool's NICs (one per
// GPU) and its GPUs' NVLink (the hardware's interconnect bandwidth per
// GPU), each scaled by the network's efficiency. built is d.Build's.
func (d *Deployment) PDPools(built *Built) ([]cluster.PDPool, error) {
	n := d.Network
	out := make([]cluster.PDPool, len(d.Pools))
	for i, p := range d.Pools {
		role := p.Role
		if role == "" {
			role = RoleBoth
		}
		r, err := cluster.ParseRole(role)
		if err != nil {
			return nil, &PoolError{Pool: i, Err: fieldErr("role", err)}
		}
		in := built.Pools[i]
		gpus := float64(p.Instance.GPUs())
		local := in.Phys.Hardware.InterconnectBandwidthGBs * 1e9
		if !(local > 0) {
			return nil, &PoolError{Pool: i, Err: fieldErrf("hardware", "%s has no interconnect_bandwidth_gb_s: its GPUs cannot move KV to one another", p.Instance.Hardware)}
		}
		out[i] = cluster.PDPool{
			Name:             p.Name,
			Role:             r,
			KVBytesPerToken:  in.Phys.KVBytesPerToken,
			NetBytesPerSec:   n.NICBytesPerSec * n.Efficiency * gpus,
			LocalBytesPerSec: local * n.Efficiency * gpus,
		}
	}
	return out, nil
}

// Validate checks n's figures; its error is a *FieldError naming the
// network's key (nic_gb_per_s, efficiency, latency_us, abort_timeout_s).
func (n Network) Validate() error {
	switch {
	case !(n.NICBytesPerSec > 0 && n.NICBytesPerSec <= 1e14):
		return fieldErrf("nic_gb_per_s", "must be in (0, 100000] GB/s, got %g", n.NICBytesPerSec/1e9)
	case !(n.Efficiency > 0 && n.Efficiency <= 1):
		return fieldErrf("efficiency", "must be in (0, 1], got %g", n.Efficiency)
	case n.LatencyUs < 0 || n.LatencyUs > MaxNetLatencyUs:
		return fieldErrf("latency_us", "must be in [0, %d] µs, got %d", MaxNetLatencyUs, n.LatencyUs)
	case n.AbortTimeoutUs < 0 || n.AbortTimeoutUs > MaxAbortTimeoutUs:
		return fieldErrf("abort_timeout_s", "must be in [0 (never), %d] s, got %g", MaxAbortTimeoutUs/1_000_000, float64(n.AbortTimeoutUs)/1e6)
	}
	return nil
}

// Bounds of the network's durations: a second of latency, a week of abort
// timeout (both far past any real setting; they keep the clock's sums in
// range).
const (
	MaxNetLatencyUs   = 1_000_000
	MaxAbortTimeoutUs = 7 * 86400 * 1_000_000
)
