package physics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// MaxMemoryGiB bounds a hardware spec's memory_gib (1 PiB): far above
// any device, low enough that KV block counts derived from it fit in int64.
const MaxMemoryGiB = 1 << 20

// jsonKeys lists a struct's JSON keys, in field order.
func jsonKeys(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); k != "" && k != "-" {
			out = append(out, k)
		}
	}
	return out
}

// DefaultGEMMShare is the share of its datasheet peak that a card without a
// measured GEMM rate (HardwareSpec.GEMMTFlops) is assumed to sustain: H100
// SXM's, whose cuBLAS BF16/FP16 GEMMs (FP32 accumulate) reach 726 and 750
// of 989 TFLOP/s at 4096³ and 8192³ (docs/simulator.md, "Compute ceiling").
const DefaultGEMMShare = 0.75

// MaxGEMMOverPeak bounds GEMMTFlops / TFlopsPeak: a card may boost above its
// rated clock, but not by half; a larger ratio is a unit or sparsity slip.
const MaxGEMMOverPeak = 1.5

// DefaultPCIeEfficiency is the share of the PCIe link that KV offload
// transfers achieve when a hardware spec does not say (docs/physics-spec.md).
const DefaultPCIeEfficiency = 0.75

// HardwareSpec is one accelerator's datasheet figures. The JSON keys are the
// golden fixture's (docs/physics-spec.md), plus memory_gib.
//
// Bandwidths are per direction: a KV offload moves data one way, and in a
// ring all-reduce each device sends and receives at the same time over
// separate lanes.
type HardwareSpec struct {
	Name string `json:"name,omitempty"`
	// TFlopsPeak is the dense (no sparsity) tensor-core peak in TFLOP/s for
	// the model's dtype.
	TFlopsPeak float64 `json:"TFlopsPeak"`
	// BwPeakTBs is the HBM bandwidth in TB/s (1e12 bytes/s).
	BwPeakTBs float64 `json:"BwPeakTBs"`
	// GEMMTFlops is the dense matrix-multiply rate in TFLOP/s that the
	// card sustains, measured (large GEMMs of the model's dtype, the kind
	// a prefill chunk runs), with its source in Sources. Datasheet peaks
	// are not equally reachable: a GeForce card boosts above its rated
	// clock, a power-limited one throttles below it. 0 means not measured:
	// SustainedTFlops then assumes DefaultGEMMShare of TFlopsPeak. Only the
	// roofline latency model reads it; the physics features stay
	// normalized by TFlopsPeak.
	GEMMTFlops float64 `json:"gemm_tflops,omitempty"`
	// GEMMShapesTable names a shipped table of this GPU type's GEMM rate
	// by shape (BuiltinGEMMShapes, physics/data/gemm/), from which the
	// roofline takes the share of SustainedTFlops a GEMM of a given shape
	// reaches (GEMMShapes). "" means none: every GEMM at SustainedTFlops.
	GEMMShapesTable string `json:"gemm_shapes,omitempty"`
	// PCIeBandwidthGBs is the host link's bandwidth in GB/s (1e9 bytes/s).
	PCIeBandwidthGBs float64 `json:"pcie_bandwidth_gb_s"`
	// PCIeEfficiency in (0, 1] scales PCIe bandwidth for contention and DMA
	// overhead; 0 in a hand-built struct means DefaultPCIeEfficiency.
	PCIeEfficiency float64 `json:"pcie_efficiency"`
	// InterconnectBandwidthGBs is the GPU-to-GPU link used for tensor-parallel
	// all-reduce (NVLink, or PCIe where there is none), in GB/s.
	InterconnectBandwidthGBs float64 `json:"interconnect_bandwidth_gb_s"`
	// Interconnect is how the GPUs of a tensor-parallel group reach each
	// other (InterconnectKinds: nvswitch, nvlink, pcie-p2p, pcie); it
	// decides which all-reduce path vLLM takes (Collectives). "" means
	// implied by the bandwidths (InterconnectKind).
	Interconnect string `json:"interconnect,omitempty"`
	// ComputeCapability is the CUDA compute capability ("9.0"), which
	// selects vLLM's all-reduce size tables; "" when unknown.
	ComputeCapability string `json:"compute_capability,omitempty"`
	// MemoryGiB is the device memory in GiB (2^30 bytes).
	MemoryGiB float64 `json:"memory_gib,omitempty"`
	// BoostClockMHz is the datasheet boost clock. Feature spec 2.0 needs it:
	// the fixed per-layer latency of small kernels is a number of GPU
	// cycles (docs/physics-spec.md, "Spec 2.0"). 0 means unknown.
	BoostClockMHz float64 `json:"boost_clock_mhz,omitempty"`
	// Sources says where the figures come from; it does not enter any formula.
	Sources []string `json:"sources,omitempty"`
	// DeviceNames are the names CUDA reports for this card
	// (torch.cuda.get_device_name), to find the spec from a run's record.
	DeviceNames []string `json:"device_names,omitempty"`
}

// ParseHardwareSpec reads and validates a hardware spec JSON. A missing
// pcie_efficiency becomes DefaultPCIeEfficiency.
func ParseHardwareSpec(data []byte, source string) (HardwareSpec, error) {
	var raw struct {
		HardwareSpec
		PCIeEfficiency *float64 `json:"pcie_efficiency"`
	}
	// Strict like the coefficient loader: encoding/json matches keys
	// case-insensitively and ignores unknown ones, so a misspelt key
	// ("tflops_peak", "memory_GiB") would silently read as 0 or be lost.
	if k, dup := duplicateKey(data); dup {
		return HardwareSpec{}, fieldErr(source, k, "given twice (which value holds is not for the reader to guess)")
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err == nil {
		known := jsonKeys(reflect.TypeOf(HardwareSpec{}))
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if !slices.Contains(known, k) {
				return HardwareSpec{}, fieldErr(source, k, "unknown key (the keys are %s; they are case-sensitive)", strings.Join(known, ", "))
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := strings.TrimPrefix(te.Field, "HardwareSpec.")
			return HardwareSpec{}, fieldErr(source, field, "expected %s, got JSON %s", te.Type, te.Value)
		}
		return HardwareSpec{}, fmt.Errorf("%s: invalid JSON: %w", source, err)
	}
	h := raw.HardwareSpec
	h.PCIeEfficiency = DefaultPCIeEfficiency
	if raw.PCIeEfficiency != nil {
		h.PCIeEfficiency = *raw.PCIeEfficiency
		if !(h.PCIeEfficiency > 0 && h.PCIeEfficiency <= 1) {
			return HardwareSpec{}, fieldErr(source, "pcie_efficiency", "must be in (0, 1], got %v", h.PCIeEfficiency)
		}
	}
	if err := h.validate(source); err != nil {
		return HardwareSpec{}, err
	}
	return h, nil
}

// Validate checks the figures every configuration needs. The interconnect
// is checked by NewPhysicsConfig, since only TP > 1 uses it, and memory only
// when KV blocks must be derived from it.
func (h HardwareSpec) Validate() error { return h.validate(h.Name) }

func (h HardwareSpec) validate(src string) error {
	// Upper bounds far above any device, so that derived sizes (KV blocks
	// from memory, step times from peaks) cannot overflow.
	for _, f := range []struct {
		name     string
		v, limit float64
	}{
		{"TFlopsPeak", h.TFlopsPeak, 1e6}, {"BwPeakTBs", h.BwPeakTBs, 1e4}, {"pcie_bandwidth_gb_s", h.PCIeBandwidthGBs, 1e6},
	} {
		if !(f.v > 0 && f.v <= f.limit) {
			return fieldErr(src, f.name, "must be in (0, %g], got %v", f.limit, f.v)
		}
	}
	if !(h.InterconnectBandwidthGBs >= 0 && h.InterconnectBandwidthGBs <= 1e6) {
		return fieldErr(src, "interconnect_bandwidth_gb_s", "must be in [0, 1e+06], got %v", h.InterconnectBandwidthGBs)
	}
	if !(h.MemoryGiB >= 0 && h.MemoryGiB <= MaxMemoryGiB) {
		return fieldErr(src, "memory_gib", "must be in [0, %g] GiB, got %v", float64(MaxMemoryGiB), h.MemoryGiB)
	}
	if !(h.BoostClockMHz >= 0 && h.BoostClockMHz < 1e5) {
		return fieldErr(src, "boost_clock_mhz", "must be in [0, 100000) MHz, got %v", h.BoostClockMHz)
	}
	if h.PCIeEfficiency < 0 || h.PCIeEfficiency > 1 {
		return fieldErr(src, "pcie_efficiency", "must be in (0, 1], got %v", h.PCIeEfficiency)
	}
	if err := h.validateInterconnect(src); err != nil {
		return err
	}
	if h.GEMMShapesTable != "" && !slices.Contains(BuiltinGEMMShapes(), h.GEMMShapesTable) {
		return fieldErr(src, "gemm_shapes", "must name a shipped GEMM table (%s) or be absent, got %q", strings.Join(BuiltinGEMMShapes(), ", "), h.GEMMShapesTable)
	}
	if !(h.GEMMTFlops >= 0 && h.GEMMTFlops <= MaxGEMMOverPeak*h.TFlopsPeak) {
		return fieldErr(src, "gemm_tflops", "must be in [0, %g × TFlopsPeak = %g] TFLOP/s (0: not measured), got %v", MaxGEMMOverPeak, MaxGEMMOverPeak*h.TFlopsPeak, h.GEMMTFlops)
	}
	return nil
}

// SustainedTFlops is the GEMM rate the roofline takes as the card's compute
// ceiling, in TFLOP/s: the measured GEMMTFlops, or DefaultGEMMShare of the
// datasheet peak when there is no measurement.
func (h HardwareSpec) SustainedTFlops() float64 {
	if h.GEMMTFlops > 0 {
		return h.GEMMTFlops
	}
	return h.TFlopsPeak * DefaultGEMMShare
}

// GEMMShapes is the hardware's GEMM table by shape, nil without one. A
// validated spec names a shipped table, which always loads.
func (h HardwareSpec) GEMMShapes() *GEMMShapes {
	if h.GEMMShapesTable == "" {
		return nil
	}
	g, err := LoadGEMMShapes(h.GEMMShapesTable)
	if err != nil {
		return nil // Validate refuses the name
	}
	return g
}

func (h HardwareSpec) pcieEfficiency() float64 {
	if h.PCIeEfficiency == 0 {
		return DefaultPCIeEfficiency
	}
	return h.PCIeEfficiency
}
