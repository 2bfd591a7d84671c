package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

// TestStepCostOf: the roofline's per-step cost follows what the deployment
// states, each case with its reason and warnings.
func TestStepCostOf(t *testing.T) {
	host := &HostProfile{Path: "h.yaml", StepOverheadUs: 700, CalibratedOn: HostRun{Records: "r.jsonl", VLLMVersion: "0.19.0", AsyncScheduling: true, RooflineKernels: true}}
	for _, tc := range []struct {
		name          string
		edit          func(*InstanceSpec)
		fixed, perReq float64
		why           []string
		warnings      []string
	}{
		{"defaults: V1, async, CUDA graphs", func(*InstanceSpec) {}, 160, 0,
			[]string{"160 µs + 0 µs per running request, for vLLM V1 with async scheduling and CUDA graphs", "vLLM PR 11133"}, nil},
		{"synchronous scheduling", func(s *InstanceSpec) { s.AsyncScheduling = false }, 160, 20.9,
			[]string{"synchronous scheduling", "20.9 µs more per request without async scheduling (github.com/vllm-project/vllm/issues/10634)"}, nil},
		{"the scalar roofline", func(s *InstanceSpec) {
			s.Latency.Roofline = &RooflineParams{ComputeEff: 0.8, BandwidthEff: 0.8, Scalar: true}
		}, 900, 4, []string{"900 µs + 4 µs per running request", "scalar bounds", "4 µs per request estimated"}, nil},
		{"a release before async by default", func(s *InstanceSpec) { s.VLLMVersion = "0.11.0" }, 160, 0,
			[]string{"vLLM 0.11.0 with async scheduling"}, []string{"schedules synchronously unless told to"}},
		{"V0", func(s *InstanceSpec) { s.VLLMVersion = "v0.6.3"; s.AsyncScheduling = false }, 160, 20.9,
			[]string{"vLLM v0.6.3"}, []string{"V0 engine"}},
		{"eager", func(s *InstanceSpec) { s.EnforceEager = true }, 160, 0,
			[]string{"eager mode"}, []string{"vllm.enforce_eager: kernel launches without CUDA graphs"}},
		{"eager, cost given", func(s *InstanceSpec) {
			s.EnforceEager = true
			s.Latency.Roofline = &RooflineParams{ComputeEff: 0.8, BandwidthEff: 0.8, StepOverheadUs: 5000, StepOverheadSet: true}
		}, 5000, 0, []string{"5000 µs", "latency.roofline.step_overhead_us"}, nil},
		{"host profile", func(s *InstanceSpec) { s.Host = host; s.VLLMVersion = "0.19.0" }, 700, 0,
			[]string{"host_profile h.yaml, calibrated on r.jsonl"}, nil},
		{"host profile of another build", func(s *InstanceSpec) { s.Host = host; s.VLLMVersion = "0.20.1"; s.EnforceEager = true }, 700, 0,
			nil, []string{"calibrated with enforce_eager false and this pool has true", "calibrated on vLLM 0.19.0 and this pool runs 0.20.1"}},
		{"given beats host", func(s *InstanceSpec) {
			s.Host = host
			s.Latency.Roofline = &RooflineParams{StepOverheadUs: 300, StepOverheadSet: true}
		}, 300, 0, []string{"latency.roofline.step_overhead_us"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultInstanceSpec()
			tc.edit(&s)
			c := StepCostOf(s)
			require.Equal(t, tc.fixed, c.FixedUs)
			require.InDelta(t, tc.perReq, c.PerRequestUs, 1e-9)
			for _, w := range tc.why {
				require.Contains(t, c.Why, w)
			}
			require.Len(t, c.Warnings, len(tc.warnings), "%q", c.Warnings)
			for i, w := range tc.warnings {
				require.Contains(t, c.Warnings[i], w)
			}
		})
	}
}

// TestStepCostReachesTheRoofline: the instance's roofline takes the cost.
func TestStepCostReachesTheRoofline(t *testing.T) {
	s := DefaultInstanceSpec()
	s.Latency.Model, s.AsyncScheduling = "roofline", false
	in, err := s.Build(sim.NewRNG(1), 0)
	require.NoError(t, err)
	require.NotNil(t, in.StepCost)
	require.InDelta(t, 20.9, in.StepCost.PerRequestUs, 1e-9)
	s.Latency.Model = "blackbox"
	in, err = s.Build(sim.NewRNG(1), 0)
	require.NoError(t, err)
	require.Nil(t, in.StepCost, "only the roofline has one")
}

// TestParseVersion reads the spellings vLLM's metadata and users write.
func TestParseVersion(t *testing.T) {
	for in, want := range map[string][3]int{"0.19.0": {0, 19, 0}, "v0.11": {0, 11, 0}, "0.10.1rc2": {0, 10, 1}, "0.11.0+cu128": {0, 11, 0}, " 1.2.3 ": {1, 2, 3}} {
		got, ok := parseVersion(in)
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "latest", "0", "x.1"} {
		_, ok := parseVersion(in)
		require.False(t, ok, in)
	}
}

// TestHostProfileRoundTripAndLayers: a profile written reads back the
// same; a pool's host_profile sets the per-step cost and output delay
// unless its own layer gives them, and beats an earlier layer's.
func TestHostProfileRoundTripAndLayers(t *testing.T) {
	dir := t.TempDir()
	od := int64(1234)
	h := &HostProfile{StepOverheadUs: 914, OutputDelayUs: &od, CalibratedOn: HostRun{Records: "a.jsonl", Model: "llama-3.1-8b", Hardware: "rtx-pro-6000", VLLMVersion: "0.19.0", AsyncScheduling: true, RooflineKernels: true}}
	data, err := h.Marshal()
	require.NoError(t, err)
	path := filepath.Join(dir, "host.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	back, err := LoadHostProfile(path)
	require.NoError(t, err)
	h.Path = path
	require.Equal(t, h, back)

	str := func(s string) *string { return &s }
	s := DefaultInstanceSpec()
	first := InstanceYAML{Latency: &LatencyYAML{Roofline: &RooflineYAML{StepOverheadUs: str("500")}}}
	require.NoError(t, first.Apply(&s, dir))
	require.True(t, s.Latency.Roofline.StepOverheadSet)
	second := InstanceYAML{HostProfile: str("host.yaml")}
	require.NoError(t, second.Apply(&s, dir))
	require.False(t, s.Latency.Roofline.StepOverheadSet, "a later layer's profile beats the earlier explicit cost")
	require.Equal(t, int64(1234), s.OutputDelayUs)
	require.Equal(t, 914.0, StepCostOf(s).FixedUs)
	same := InstanceYAML{HostProfile: str("host.yaml"), VLLM: &VLLMYAML{OutputDelayUs: ptr(int64(7))},
		Latency: &LatencyYAML{Roofline: &RooflineYAML{StepOverheadUs: str("300")}}}
	require.NoError(t, same.Apply(&s, dir))
	require.Equal(t, int64(7), s.OutputDelayUs, "the same layer's own key wins")
	require.Equal(t, 300.0, StepCostOf(s).FixedUs)
	require.Equal(t, path, *s.YAML().HostProfile)
	require.NoError(t, (&InstanceYAML{HostProfile: str("")}).Apply(&s, dir))
	require.Nil(t, s.Host)

	err = (&InstanceYAML{HostProfile: str("missing.yaml")}).Apply(&s, dir)
	require.ErrorContains(t, err, "host_profile: open missing.yaml: no such file")
	err = (&InstanceYAML{Latency: &LatencyYAML{Roofline: &RooflineYAML{StepOverheadUs: str("fast")}}}).Apply(&s, dir)
	require.ErrorContains(t, err, `latency.roofline.step_overhead_us: want µs >= 0 or auto (from the vLLM version, async scheduling and CUDA graphs), got "fast"`)
	err = (&InstanceYAML{VLLM: &VLLMYAML{Version: str("latest")}}).Apply(&s, dir)
	require.ErrorContains(t, err, `vllm.version: want a vLLM release such as 0.19.0, got "latest"`)
}

// TestParseHostProfileErrors: each broken profile names its file, line or
// key.
func TestParseHostProfileErrors(t *testing.T) {
	const on = "calibrated_on: {records: r, model: m, hardware: h, async_scheduling: true, enforce_eager: false}\n"
	for _, tc := range []struct{ in, want string }{
		{"", "h.yaml: empty file"},
		{"step_overhead_us: 900\n" + on, "h.yaml: a host profile needs version: 2"},
		{"version: 3\nstep_overhead_us: 900\n" + on, "h.yaml:1: version: this blis reads version 2 host profiles, got 3"},
		{"version: 1\nstep_overhead_us: 900\n" + on, "h.yaml:1: version: a version 1 host profile was calibrated with the roofline's scalar bounds"},
		{"version: 2\n" + on, "h.yaml: step_overhead_us is missing"},
		{"version: 2\nstep_overhead_us: -5\n" + on, "h.yaml:2: step_overhead_us: must be in [0, 1e6] µs, got -5"},
		{"version: 2\nstep_overhead_us: 900\noutput_delay_us: -1\n" + on, "h.yaml:3: output_delay_us: must be in [0, 60000000] µs"},
		{"version: 2\nstep_overhead_us: 900\n", "h.yaml: calibrated_on is missing"},
		{"version: 2\nstep_overhead_us: 900\nstep: 3\n" + on, `h.yaml:3: unknown key "step" in a host profile; use one of version, step_overhead_us, output_delay_us, calibrated_on`},
	} {
		_, err := ParseHostProfile([]byte(tc.in), "h.yaml")
		require.Error(t, err, tc.in)
		require.True(t, strings.Contains(err.Error(), tc.want), "%q: got %v, want %q", tc.in, err, tc.want)
	}
}

// FuzzParseHostProfile: the parser never panics, and what it accepts
// writes and reads back the same.
func FuzzParseHostProfile(f *testing.F) {
	h := &HostProfile{StepOverheadUs: 914, CalibratedOn: HostRun{Records: "r", AsyncScheduling: true}}
	data, _ := h.Marshal()
	f.Add(data)
	f.Add([]byte("version: 2\nstep_overhead_us: 0\noutput_delay_us: 5\ncalibrated_on: {roofline_kernels: true}\n"))
	f.Add([]byte("version: 1\nstep_overhead_us: 0\noutput_delay_us: 5\ncalibrated_on: {}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseHostProfile(data, "fuzz")
		if err != nil {
			return
		}
		out, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseHostProfile(out, "fuzz")
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		require.Equal(t, p, back)
	})
}
