package physics

import (
	"fmt"
	"slices"
)

// The interconnect kinds a hardware spec names (its "interconnect" key):
// how the GPUs of one tensor-parallel group reach each other.
const (
	// InterconnectNVSwitch: NVLink to NVSwitches (HGX/DGX boards): every
	// pair of GPUs at the full per-GPU NVLink bandwidth, and NVLink
	// multicast (NVLS) from compute capability 9.0.
	InterconnectNVSwitch = "nvswitch"
	// InterconnectNVLink: point-to-point NVLink (bridges): a pair is
	// connected, a larger group is not fully connected.
	InterconnectNVLink = "nvlink"
	// InterconnectPCIeP2P: PCIe only, with peer-to-peer access between
	// GPUs (vLLM's custom all-reduce runs for two GPUs).
	InterconnectPCIeP2P = "pcie-p2p"
	// InterconnectPCIe: PCIe only, no peer-to-peer (GeForce cards):
	// every collective goes through NCCL over host memory.
	InterconnectPCIe = "pcie"
)

// InterconnectKinds lists the valid values of a hardware spec's
// "interconnect" key.
var InterconnectKinds = []string{InterconnectNVSwitch, InterconnectNVLink, InterconnectPCIeP2P, InterconnectPCIe}

// AllReducePath is the implementation vLLM runs a tensor-parallel
// all-reduce with.
type AllReducePath uint8

const (
	PathNone            AllReducePath = iota // one rank: no all-reduce
	PathCustomOneShot                        // vLLM's custom all-reduce, one-stage kernel
	PathCustomTwoShot                        // vLLM's custom all-reduce, two-stage kernel
	PathSymmMemMultimem                      // torch symmetric memory, NVLink multicast
	PathSymmMemTwoShot                       // torch symmetric memory, two-shot
	PathNCCL                                 // NCCL (pynccl)
)

func (p AllReducePath) String() string {
	return [...]string{"none", "custom-1stage", "custom-2stage", "symm-mem-multimem", "symm-mem-2shot", "nccl"}[p]
}

// Collectives is the collective-communication model of one GPU type's
// tensor-parallel group (docs/physics-spec.md, "Collectives"): which path
// vLLM takes for an all-reduce of a given size and world size, as vLLM's
// own dispatch chooses it (vllm/distributed/device_communicators:
// cuda_communicator.py's all_reduce, custom_all_reduce.py's
// should_custom_ar, symm_mem.py, all_reduce_utils.py's size tables, the
// kernel's one- or two-stage choice in csrc/custom_all_reduce.cuh), and
// what each path costs: a latency and the bytes each rank moves over a
// share of its link, each constant fitted to public per-size
// measurements (collectiveConstants). It is a pure function of its
// fields; the zero value is not valid (HardwareSpec.Collectives builds
// one).
type Collectives struct {
	// Kind is one of InterconnectKinds.
	Kind string
	// LinkBytesPerS is one GPU's link bandwidth per direction, bytes/s.
	LinkBytesPerS float64
	// CC is the compute capability ("9.0"), which selects vLLM's size
	// tables and whether torch symmetric memory runs; "" when unknown.
	CC string
	// HostLinkBytesPerS is one GPU's PCIe link per direction, bytes/s:
	// between GPUs linked in NVLink pairs (Kind nvlink) a ring over more
	// than two of them crosses from pair to pair over PCIe. 0 when
	// unknown (the ring is then priced on the NVLink).
	HostLinkBytesPerS float64
}

// Collectives returns the hardware's collective model.
func (h HardwareSpec) Collectives() Collectives {
	return Collectives{Kind: h.InterconnectKind(), LinkBytesPerS: h.InterconnectBandwidthGBs * 1e9, CC: h.ComputeCapability,
		HostLinkBytesPerS: h.PCIeBandwidthGBs * 1e9}
}

// InterconnectKind is the spec's interconnect, or the one its bandwidths
// imply when it names none: NVSwitch when the GPU-to-GPU link is faster
// than the host link, else PCIe with peer-to-peer access.
func (h HardwareSpec) InterconnectKind() string {
	switch {
	case h.Interconnect != "":
		return h.Interconnect
	case h.InterconnectBandwidthGBs > h.PCIeBandwidthGBs:
		return InterconnectNVSwitch
	}
	return InterconnectPCIeP2P
}

const (
	kib = 1 << 10
	mib = 1 << 20
)

// The constants of each path. Shares are of one GPU's link bandwidth per
// direction (LinkBytesPerS); latencies in µs. docs/physics-spec.md
// ("Collectives") has the fits and TestCollectivesReproducePublicTables
// the comparison with every table named here.
const (
	// vLLM's custom all-reduce, one-stage kernel: every rank reads the
	// whole message from each of the n−1 peers. Fitted (largest error
	// 8 %) to vLLM pull 24111's H100 SXM table (ca_1stage, CUDA graphs,
	// TP 4 and 6, 0.5–4 MiB) and sglang pull 2904's vLLM row at TP 2
	// (2 and 4 MiB): a 5.6 µs latency, and reads at 0.41 of the link
	// from one peer, 0.79 of it from all peers together.
	customOneShotLatencyUs = 5.6
	customOneShotPeerShare = 0.41
	customOneShotAggShare  = 0.79
	// Between PCIe GPUs with peer access, the one-stage kernel reads its
	// peer at 0.13 of the link. No public per-size measurement of vLLM's
	// kernel over PCIe exists; the figure is the one the simulator used
	// before this model, kept until one is published.
	customOneShotPCIePeerShare = 0.13
	// Two-stage kernel (reduce-scatter then all-gather through the
	// peers' buffers): 2(n−1)/n of the message. Fitted (largest error
	// 11 %) to pull 24111's ca_2stage at TP 4 and sglang 2904's vLLM rows
	// at TP 4 and 8 (2 and 4 MiB; below 256 KiB at TP 8 and 512 KiB at
	// TP 4 vLLM runs the one-stage kernel).
	customTwoShotLatencyUs = 11.8
	customTwoShotShare     = 0.43
	// Torch symmetric memory. Multimem (NVLink multicast: the switch
	// reduces) moves about the message itself per rank, whatever n;
	// two-shot 2(n−1)/n of it. Fitted to pull 24111's symm_mem_multimem
	// and symm_mem_two_shot columns at TP 4 and 6 (largest errors 10 %
	// and 14 %).
	symmMultimemLatencyUs = 11.7
	symmMultimemShare     = 0.44
	symmTwoShotLatencyUs  = 14.6
	symmTwoShotShare      = 0.755
	// NCCL's ring moves 2(n−1)/n of the message per rank; NCCL's tuner
	// takes the fastest of its protocols (src/graph/tuning.cc), so the
	// time is the least of:
	//  - the low-latency protocol: fitted to pull 24111's pynccl column
	//    at TP 4 (13.6 µs, 0.595 of the link; largest error 3 %), plus
	//    0.6 µs per ring step away from TP 4's six (tuning.cc's NVLink
	//    LL hop; 1.0 over PCIe);
	//  - the simple protocol: tuning.cc's latencies (8.4 µs base, 3.4 µs
	//    per ring step over NVLink, 5.7 over PCIe) at NCCL's link rating
	//    (src/graph/topo.h: 20.6 of 25 GB/s per H100 NVLink lane; NCCL's
	//    maintainer: "an effective NVLink bandwidth of 370GB/s" of 450,
	//    github.com/NVIDIA/nccl-tests/issues/212), 0.82 of an NVLink; over PCIe 0.55,
	//    the 35 GB/s bus bandwidth measured on PCIe Gen5 x16
	//    (github.com/NVIDIA/nccl/issues/1639);
	//  - NVLink SHARP (NVLS) on NVSwitch from compute capability 9.0:
	//    about the message per rank at 0.61 of the link (an 8 × H100 bus
	//    bandwidth of ~480 GB/s, algorithm bandwidth ~275, nccl-tests
	//    issues/212; 476 GB/s measured in nccl-tests issues/290), after
	//    tuning.cc's 25 µs NVLS latency.
	// Over PCIe the low-latency protocol keeps the share of the simple
	// protocol's bandwidth it has over NVLink (0.595 / 0.82).
	ncclLLLatencyTP4Us  = 13.6
	ncclLLShare         = 0.595
	ncclLLHopUsNVLink   = 0.6
	ncclLLHopUsPCIe     = 1.0
	ncclSimpleBaseUs    = 8.4
	ncclSimpleHopNVLink = 3.4
	ncclSimpleHopPCIe   = 5.7
	ncclSimpleShareNV   = 0.82
	ncclSimpleSharePCIe = 0.55
	ncclNVLSLatencyUs   = 25
	ncclNVLSShare       = 0.61
	// Between NVLink pairs a ring of more than two GPUs crosses PCIe, at
	// 0.75 of its per-direction rate: the bus bandwidth Vidur measured for
	// NCCL's all-reduce over four GPUs in two NVLink pairs, 48.7 GB/s on
	// H100 (PCIe Gen5 x16, 64 GB/s) and 23.5 GB/s on A100 (Gen4 x16,
	// 32 GB/s) at their largest messages (testdata/vidur/network/
	// *_pairwise_nvlink), against 189 and 194 GB/s for two GPUs of one pair.
	ncclCrossPairShare   = 0.75
	customAllReduceMaxSz = 8 * mib // CustomAllreduce's max_size default
)

// customMaxSizes and symmMemMaxSizes are vLLM's all_reduce_utils.py
// CUSTOM_ALL_REDUCE_MAX_SIZES and SYMM_MEM_ALL_REDUCE_MAX_SIZES, by
// compute capability and world size (vLLM 0.11 on, where torch symmetric
// memory is on by default, VLLM_ALLREDUCE_USE_SYMM_MEM).
var (
	customMaxSizes = map[string]map[int]float64{
		"9.0":  {2: 64 * mib, 4: 32 * mib, 6: 512 * kib, 8: 256 * kib},
		"10.0": {2: 2 * mib, 4: 2 * mib, 6: 1 * mib, 8: 1 * mib},
		"10.3": {2: 4 * mib, 4: 4 * mib, 6: 8 * mib, 8: 4 * mib},
	}
	symmMemMaxSizes = map[string]map[int]float64{
		"9.0":  {2: 64 * mib, 4: 32 * mib, 6: 64 * mib, 8: 64 * mib},
		"10.0": {2: 8 * mib, 4: 32 * mib, 6: 128 * mib, 8: 128 * mib},
		"10.3": {2: 4 * mib, 4: 32 * mib, 6: 32 * mib, 8: 64 * mib},
	}
	// symm_mem.py's _WORLD_SIZES_MULTIMEM: the world sizes that use
	// multimem; the others use two-shot.
	symmMemMultimem = map[string][]int{"9.0": {4, 6, 8}, "10.0": {6, 8}, "10.3": {6, 8}}
)

func (c Collectives) nvlink() bool {
	return c.Kind == InterconnectNVSwitch || c.Kind == InterconnectNVLink
}

// customEligible says whether vLLM's custom all-reduce runs for world
// size n at all: 2, 4, 6 or 8 ranks with peer access, more than two
// only when fully connected.
func (c Collectives) customEligible(n int) bool {
	if (n != 2 && n != 4 && n != 6 && n != 8) || c.Kind == InterconnectPCIe {
		return false
	}
	return n == 2 || c.Kind == InterconnectNVSwitch
}

// customMaxBytes is the largest message (exclusive) the custom
// all-reduce takes at world size n.
func (c Collectives) customMaxBytes(n int) float64 {
	if t, ok := customMaxSizes[c.CC]; ok {
		return min(t[n], customAllReduceMaxSz)
	}
	return customAllReduceMaxSz
}

// symmMemMaxBytes is the largest message (inclusive) torch symmetric
// memory takes at world size n, 0 when it does not run: it needs NVLink
// multicast (NVSwitch) and a compute capability in vLLM's table.
func (c Collectives) symmMemMaxBytes(n int) float64 {
	if c.Kind != InterconnectNVSwitch {
		return 0
	}
	return symmMemMaxSizes[c.CC][n]
}

// AllReduce is the time in seconds of one all-reduce of msgBytes over n
// ranks and the path vLLM takes for it: the custom all-reduce below its
// size limit, then torch symmetric memory where it runs, then NCCL.
func (c Collectives) AllReduce(msgBytes float64, n int) (float64, AllReducePath) {
	p := c.Plan(n)
	return p.AllReduce(msgBytes)
}

// AllReducePlan is Collectives' dispatch for one world size, resolved
// once (the size limits and algorithm choices that depend on n and the
// compute capability), so that a per-step call costs a few comparisons.
type AllReducePlan struct {
	c         Collectives
	n         int
	customMax float64 // exclusive; 0 when the custom all-reduce does not run
	symmMax   float64 // inclusive; 0 when symmetric memory does not run
}

// Plan resolves the dispatch for world size n.
func (c Collectives) Plan(n int) AllReducePlan {
	p := AllReducePlan{c: c, n: n, symmMax: c.symmMemMaxBytes(n)}
	if c.customEligible(n) {
		p.customMax = c.customMaxBytes(n)
	}
	return p
}

// N is the plan's world size.
func (p *AllReducePlan) N() int { return p.n }

// AllReduce is Collectives.AllReduce at the plan's world size.
func (p *AllReducePlan) AllReduce(msgBytes float64) (float64, AllReducePath) {
	switch {
	case p.n <= 1:
		return 0, PathNone
	case msgBytes < p.customMax:
		return p.c.CustomAllReduce(msgBytes, p.n)
	case msgBytes <= p.symmMax:
		return p.c.SymmMemAllReduce(msgBytes, p.n)
	}
	return p.c.NCCLAllReduce(msgBytes, p.n), PathNCCL
}

// CustomAllReduce is the time of vLLM's custom all-reduce of msgBytes
// over n ranks, whatever its size limit, with the kernel vLLM's C++
// chooses: one stage for two ranks and for small messages on a fully
// connected group (below 512 KiB up to 4 ranks, 256 KiB up to 8), two
// stages otherwise.
func (c Collectives) CustomAllReduce(msgBytes float64, n int) (float64, AllReducePath) {
	nf := float64(n)
	L := c.LinkBytesPerS
	if n == 2 || (c.Kind == InterconnectNVSwitch && ((n <= 4 && msgBytes < 512*kib) || (n <= 8 && msgBytes < 256*kib))) {
		peer := customOneShotPeerShare
		if !c.nvlink() {
			peer = customOneShotPCIePeerShare
		}
		bw := min((nf-1)*peer, customOneShotAggShare) * L
		return customOneShotLatencyUs*1e-6 + (nf-1)*msgBytes/bw, PathCustomOneShot
	}
	return customTwoShotLatencyUs*1e-6 + 2*(nf-1)/nf*msgBytes/(customTwoShotShare*L), PathCustomTwoShot
}

// SymmMemAllReduce is the time of torch symmetric memory's all-reduce,
// multimem or two-shot as vLLM chooses by world size.
func (c Collectives) SymmMemAllReduce(msgBytes float64, n int) (float64, AllReducePath) {
	nf := float64(n)
	if slices.Contains(symmMemMultimem[c.CC], n) {
		return symmMultimemLatencyUs*1e-6 + msgBytes/(symmMultimemShare*c.LinkBytesPerS), PathSymmMemMultimem
	}
	return symmTwoShotLatencyUs*1e-6 + 2*(nf-1)/nf*msgBytes/(symmTwoShotShare*c.LinkBytesPerS), PathSymmMemTwoShot
}

// NCCLAllReduce is the time of NCCL's all-reduce of msgBytes over n
// ranks: the fastest of its protocols and, on NVSwitch from compute
// capability 9.0, NVLink SHARP.
func (c Collectives) NCCLAllReduce(msgBytes float64, n int) float64 {
	nf := float64(n)
	t := c.ncclRing(2*(nf-1)/nf*msgBytes, 2*(nf-1), n)
	if c.Kind == InterconnectNVSwitch && ccMajor(c.CC) >= 9 {
		t = min(t, ncclNVLSLatencyUs*1e-6+msgBytes/(ncclNVLSShare*c.LinkBytesPerS))
	}
	return t
}

// NCCLGather is the time of one NCCL all-gather or reduce-scatter over n
// ranks in which each rank receives busBytes (n − 1 ranks' shares): a
// ring of n − 1 steps.
func (c Collectives) NCCLGather(busBytes float64, n int) float64 {
	if n <= 1 {
		return 0
	}
	return c.ncclRing(busBytes, float64(n-1), n)
}

// ncclRing is the time of a ring collective of the given steps over n
// ranks that moves busBytes per rank: the faster of NCCL's low-latency
// and simple protocols, on the ring's slowest link (PCIe between NVLink
// pairs when the ring spans more than one pair).
func (c Collectives) ncclRing(busBytes, steps float64, n int) float64 {
	L := c.LinkBytesPerS
	llHop, simpleHop, simpleShare := ncclLLHopUsNVLink, ncclSimpleHopNVLink, ncclSimpleShareNV
	switch {
	case c.Kind == InterconnectNVLink && n > 2 && c.HostLinkBytesPerS > 0:
		L = c.HostLinkBytesPerS
		llHop, simpleHop, simpleShare = ncclLLHopUsPCIe, ncclSimpleHopPCIe, ncclCrossPairShare
	case !c.nvlink():
		llHop, simpleHop, simpleShare = ncclLLHopUsPCIe, ncclSimpleHopPCIe, ncclSimpleSharePCIe
	}
	llShare := ncclLLShare * simpleShare / ncclSimpleShareNV
	ll := (ncclLLLatencyTP4Us-6*ncclLLHopUsNVLink+steps*llHop)*1e-6 + busBytes/(llShare*L)
	simple := (ncclSimpleBaseUs+steps*simpleHop)*1e-6 + busBytes/(simpleShare*L)
	return min(ll, simple)
}

// ccMajor is the major version of a compute capability ("9.0" → 9), 0
// when unknown. (No fmt: NCCLAllReduce calls it per all-reduce.)
func ccMajor(cc string) int {
	major := 0
	for i := 0; i < len(cc); i++ {
		switch b := cc[i]; {
		case b >= '0' && b <= '9':
			major = major*10 + int(b-'0')
		case b == '.' && i > 0:
			return major
		default:
			return 0
		}
	}
	return 0
}

// validateInterconnect checks the interconnect keys of a hardware spec.
func (h HardwareSpec) validateInterconnect(src string) error {
	if h.Interconnect != "" && !slices.Contains(InterconnectKinds, h.Interconnect) {
		return fieldErr(src, "interconnect", "must be one of %v, got %q", InterconnectKinds, h.Interconnect)
	}
	if cc := h.ComputeCapability; cc != "" {
		var major, minor int
		var rest string
		if n, _ := fmt.Sscanf(cc, "%d.%d%s", &major, &minor, &rest); n != 2 || major < 1 || major > 99 || minor < 0 || minor > 9 || fmt.Sprintf("%d.%d", major, minor) != cc {
			return fieldErr(src, "compute_capability", "must be major.minor as CUDA reports it (\"9.0\", \"8.9\"), got %q", cc)
		}
	}
	return nil
}
