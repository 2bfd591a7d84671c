package deploy

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/internal/inputfile"
	"github.com/blis-sim/blis/internal/yamlfile"
)

// A host profile is what `blis validate --calibrate --save-host-profile`
// found on one measured run that carries to any deployment on the same
// vLLM build and host (docs/validation.md): the engine core's per-step
// cost and, for records measured at the client, the output delay. A pool
// takes one with host_profile: FILE (--host-profile FILE): its per-step
// cost replaces the one the vLLM version, async scheduling and CUDA graphs
// imply (StepCostOf), and its output delay vllm.output_delay_us, unless
// the same layer (the file, or the flags) gives those keys itself.

// HostProfileVersion is the host profile format this blis reads and
// writes. Version 2 says which roofline the per-step cost was calibrated
// with (calibrated_on.roofline_kernels): the scalar bounds' per-step cost
// holds the GPU's kernel latencies, which the kernel model prices itself.
const HostProfileVersion = 2

// HostProfile is a parsed host profile.
type HostProfile struct {
	// Path is the file it was read from ("" for one not yet written).
	Path string
	// StepOverheadUs is the engine core's per-step cost, µs.
	StepOverheadUs float64
	// OutputDelayUs is the delay from a token's step end to the client,
	// µs; nil when the calibration did not fit it (engine-side records).
	OutputDelayUs *int64
	// CalibratedOn says on what run, so that a deployment that differs can
	// be warned.
	CalibratedOn HostRun
}

// HostRun is the run a host profile was calibrated on.
type HostRun struct {
	Records         string `yaml:"records"`
	Model           string `yaml:"model"`
	Hardware        string `yaml:"hardware"`
	VLLMVersion     string `yaml:"vllm_version,omitempty"`
	AsyncScheduling bool   `yaml:"async_scheduling"`
	EnforceEager    bool   `yaml:"enforce_eager"`
	// RooflineKernels is latency.roofline.kernels of the calibration.
	RooflineKernels bool `yaml:"roofline_kernels"`
}

type hostProfileYAML struct {
	Version        *int     `yaml:"version"`
	StepOverheadUs *float64 `yaml:"step_overhead_us"`
	OutputDelayUs  *int64   `yaml:"output_delay_us,omitempty"`
	CalibratedOn   *HostRun `yaml:"calibrated_on"`
}

var hostMappings = map[string]yamlfile.Mapping{
	"deploy.hostProfileYAML": {What: "a host profile", Keys: reflect.TypeOf(hostProfileYAML{})},
	"deploy.HostRun":         {What: "calibrated_on", Keys: reflect.TypeOf(HostRun{})},
}

// ParseHostProfile reads a host profile; errors name source, line and key.
func ParseHostProfile(data []byte, source string) (*HostProfile, error) {
	var y hostProfileYAML
	doc, err := yamlfile.Decode(data, source, &y, hostMappings)
	if err != nil {
		return nil, err
	}
	switch {
	case y.Version == nil:
		return nil, fmt.Errorf("%s: a host profile needs version: %d at its top (written by blis validate --calibrate --save-host-profile)", source, HostProfileVersion)
	case *y.Version == 1:
		return nil, doc.Errorf("version", "a version 1 host profile was calibrated with the roofline's scalar bounds, whose per-step cost holds the GPU's kernel latencies; calibrate it again (blis validate --calibrate --save-host-profile) for a version %d profile", HostProfileVersion)
	case *y.Version != HostProfileVersion:
		return nil, doc.Errorf("version", "this blis reads version %d host profiles, got %d", HostProfileVersion, *y.Version)
	case y.StepOverheadUs == nil:
		return nil, fmt.Errorf("%s: step_overhead_us is missing (the engine core's per-step cost, µs)", source)
	case !(*y.StepOverheadUs >= 0 && *y.StepOverheadUs <= 1e6) || math.IsInf(*y.StepOverheadUs, 0):
		return nil, doc.Errorf("step_overhead_us", "must be in [0, 1e6] µs, got %v", *y.StepOverheadUs)
	case y.OutputDelayUs != nil && (*y.OutputDelayUs < 0 || *y.OutputDelayUs > 60_000_000):
		return nil, doc.Errorf("output_delay_us", "must be in [0, 60000000] µs, got %d", *y.OutputDelayUs)
	case y.CalibratedOn == nil:
		return nil, fmt.Errorf("%s: calibrated_on is missing (the run the profile was calibrated on)", source)
	}
	return &HostProfile{Path: source, StepOverheadUs: *y.StepOverheadUs, OutputDelayUs: y.OutputDelayUs, CalibratedOn: *y.CalibratedOn}, nil
}

// LoadHostProfile reads the host profile at path.
func LoadHostProfile(path string) (*HostProfile, error) {
	data, err := inputfile.Read(path)
	if err != nil {
		return nil, err
	}
	return ParseHostProfile(data, path)
}

// Marshal writes the profile as ParseHostProfile reads it, with a header
// saying what it is.
func (h *HostProfile) Marshal() ([]byte, error) {
	y := hostProfileYAML{Version: ptr(HostProfileVersion), StepOverheadUs: &h.StepOverheadUs, OutputDelayUs: h.OutputDelayUs, CalibratedOn: &h.CalibratedOn}
	out, err := yaml.Marshal(y)
	if err != nil {
		return nil, err
	}
	head := "# blis host profile (docs/validation.md): what blis validate --calibrate found on one run that carries to\n" +
		"# any deployment on the same vLLM build and host. Use it with --host-profile FILE (or a pool's host_profile: FILE).\n"
	return append([]byte(head), out...), nil
}

// hostNotes are the differences between the run a profile was calibrated
// on and spec, for the run's warnings.
func (h *HostProfile) hostNotes(s InstanceSpec) []string {
	c := h.CalibratedOn
	var out []string
	if c.EnforceEager != s.EnforceEager {
		out = append(out, fmt.Sprintf("host_profile %s was calibrated with enforce_eager %v and this pool has %v: the per-step cost of eager mode differs by milliseconds; calibrate a profile on a run like it", h.Path, c.EnforceEager, s.EnforceEager))
	}
	if kernels := s.Latency.Roofline == nil || !s.Latency.Roofline.Scalar; c.RooflineKernels != kernels {
		out = append(out, fmt.Sprintf("host_profile %s was calibrated with latency.roofline.kernels %v and this pool has %v: the scalar bounds' per-step cost holds the GPU's kernel latencies, the kernel model's does not; calibrate a profile with this pool's roofline", h.Path, c.RooflineKernels, kernels))
	}
	if c.VLLMVersion != "" && s.VLLMVersion != "" && strings.TrimSpace(c.VLLMVersion) != s.VLLMVersion {
		out = append(out, fmt.Sprintf("host_profile %s was calibrated on vLLM %s and this pool runs %s: a per-step cost carries to the same vLLM build", h.Path, c.VLLMVersion, s.VLLMVersion))
	}
	return out
}

// applyHost applies the layer's host_profile: the profile's per-step cost
// replaces any set by an earlier layer, and its output delay the spec's,
// unless this layer gives those keys itself; "" removes the profile.
func (y *InstanceYAML) applyHost(s *InstanceSpec, dir string) error {
	if y.HostProfile == nil {
		return nil
	}
	path := strings.TrimSpace(*y.HostProfile)
	if path == "" {
		s.Host = nil
		return nil
	}
	h, err := LoadHostProfile(resolve(path, dir))
	if err != nil {
		return fieldErr("host_profile", err)
	}
	s.Host = h
	if h.OutputDelayUs != nil && (y.VLLM == nil || y.VLLM.OutputDelayUs == nil) {
		s.OutputDelayUs = *h.OutputDelayUs
	}
	if r := s.Latency.Roofline; r != nil && (y.Latency == nil || y.Latency.Roofline == nil || y.Latency.Roofline.StepOverheadUs == nil) {
		r.StepOverheadUs, r.StepOverheadSet = DefaultRooflineParams.StepOverheadUs, false
	}
	return nil
}
