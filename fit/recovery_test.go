package fit

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/physics"
	"github.com/blis-sim/blis/sim"
)

// truthBeta is a plausible step-time model, exactly linear in the features.
var truthBeta = [features.NumBeta]float64{
	1.8, 1.5, 1.4, 2.0, 1.3, 0.002, 0.001, 0, 1, 0, 0.0005, 0.01, 1.2, 1.1, 0.0008, 0.004,
}

// truthBetaV2 is a plausible spec 2.0 model: compute at 60 % of peak,
// weights at 80 %, 20 µs all-reduce hops, 1400 cycles a layer.
var truthBetaV2 = [features.NumBeta]float64{1.7, 1.25, 1.5, 1.3, 1.1, 2, 1.4, 1.2, 1.1}

// TestExactRecovery: a fit recovers a step-time model that is exactly
// linear in the features it fits, for each feature spec.
func TestExactRecovery(t *testing.T) {
	for _, spec := range features.Specs {
		t.Run(spec, func(t *testing.T) { testExactRecovery(t, spec) })
	}
}

func testExactRecovery(t *testing.T, spec string) {
	truth := truthBeta
	if spec != features.SpecV1 {
		truth = truthBetaV2
	}
	for _, tc := range []struct {
		name string
		mod  func(*simRun)
	}{
		{"chunked prefill", func(*simRun) {}},
		{"cpu offload", func(r *simRun) { r.cpuBlock, r.offload, r.knobs.TotalKVBlocksGPU = 20000, 0.3, 1500 }},
		{"prefix caching", func(r *simRun) { r.knobs.PrefixCachingEnabled, r.prefixGroups = true, 4 }},
		{"no chunked prefill", func(r *simRun) { r.knobs.ChunkedPrefillEnabled = false }},
		{"preemptions", func(r *simRun) { r.knobs.TotalKVBlocksGPU = 700 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := defaultSimRun()
			r.latency = func(c *physics.PhysicsConfig) sim.LatencyModel {
				return &sim.Physics{Cfg: c, Spec: spec, Beta: truth, Gamma: 0.3, Overheads: sim.DefaultOverheads()}
			}
			tc.mod(&r)
			c := simulate(t, dir, r)
			tr, err := LoadTrace(filepath.Join(dir, "tables"))
			require.NoError(t, err)
			opt := DefaultOptions()
			opt.Spec = spec
			opt.Progress = t.Logf
			res, err := Run([]Config{{Name: tc.name, Phys: c, Traces: []*Trace{tr}}}, opt, "test")
			require.NoError(t, err)
			b := res.Report.Beta
			t.Logf("beta: %d samples, λ=%g γ=%g, hold-out %+v, skipped %v", b.Samples, b.Lambda, b.Gamma, b.Holdout[0].Errors, b.Skipped)
			require.Less(t, b.Holdout[0].MAPE, 0.01)
			require.Equal(t, b.Samples, b.Sources[SourcePairs], "every target from step pairs")
			if tc.name == "preemptions" && spec == features.SpecV1 { // spec 2.0 has no preemption feature
				require.Equal(t, 0.3, b.Gamma, "the generating γ has the best CV score")
			}
		})
	}
}
