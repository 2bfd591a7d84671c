package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/steady"
)

// The output analysis's flags, attacked: each class of bad value is
// refused with the flag named.
func TestSteadyFlagsRefuseBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		// --warmup: not a duration, negative, sub-µs, beyond the clock.
		{[]string{"--warmup", "nan"}, `--warmup: auto, none or a duration (30s, 2m; whole µs): "nan" is not a duration`},
		{[]string{"--warmup", ""}, `--warmup: auto, none or a duration`},
		{[]string{"--warmup", "-5s"}, "--warmup: auto, none or a duration (30s, 2m; whole µs): -5s is negative"},
		{[]string{"--warmup", "1500ns"}, "1500ns is not a whole number of microseconds"},
		{[]string{"--warmup", "0.5us"}, "0.5us is not a whole number of microseconds"},
		{[]string{"--warmup", "1e300s"}, `"1e300s" is not a duration`},
		// A duration too large for Go's clock was "not a duration".
		{[]string{"--warmup", "99999999999h"}, "--warmup: auto, none or a duration (30s, 2m; whole µs): 99999999999h is beyond the clock's 2305843009213693952 µs"},
		{[]string{"--precision", "0.05", "--max-sim-time", "9999999999999h"}, "--max-sim-time: a duration (30m, 24h; whole µs): 9999999999999h is beyond the clock's"},
		// --precision: NaN, infinite, negative, too fine, above 1.
		{[]string{"--precision", "nan"}, "--precision: must be finite, got nan"},
		{[]string{"--precision", "inf"}, "--precision: must be finite, got inf"},
		{[]string{"--precision", "-1"}, "--precision: must be a relative half-width in [0.0001, 1]"},
		{[]string{"--precision", "1e-15"}, "--precision: 1e-15 is finer than 0.0001: no run would reach it before its caps"},
		{[]string{"--precision", "1e300"}, "--precision: 1e+300 is a half-width above the estimate itself"},
		// Its metric and caps: unknown, without --precision, out of range.
		{[]string{"--precision", "0.05", "--precision-metric", "ttft_p42_ms"}, `--precision-metric: "ttft_p42_ms" has no interval within a run; use one of requests_per_s`},
		{[]string{"--precision-metric", "e2e_mean_ms"}, "--precision-metric: has no effect without --precision"},
		{[]string{"--max-requests", "5000"}, "--max-requests: has no effect without --precision"},
		{[]string{"--max-sim-time", "1h"}, "--max-sim-time: has no effect without --precision"},
		{[]string{"--precision", "0.05", "--max-requests", "0"}, "--max-requests: must be within [1, 2147483647] requests, got 0"},
		{[]string{"--precision", "0.05", "--max-requests", "-3"}, "--max-requests: must be within [1, 2147483647] requests, got -3"},
		{[]string{"--precision", "0.05", "--max-requests", "9223372036854775807"}, "--max-requests: must be within [1, 2147483647] requests"},
		{[]string{"--precision", "0.05", "--max-requests", "1.5"}, "--max-requests: want a whole number, got 1.5 (fractions are not rounded)"},
		{[]string{"--precision", "0.05", "--max-sim-time", "0s"}, "--max-sim-time: must be > 0"},
		{[]string{"--precision", "0.05", "--max-sim-time", "100ns"}, "--max-sim-time: a duration (30m, 24h; whole µs): 100ns is not a whole number of microseconds"},
		{[]string{"--precision", "0.05", "--max-sim-time", "-1m"}, "-1m is negative"},
		// --precision on what it cannot size.
		{[]string{"--precision", "0.05", "--requests", "2000", "--max-requests", "1000"}, "--requests: 2000 is more than --max-requests 1000"},
		{[]string{"--precision", "0.05", "--scenario", "diurnal-cycle"}, "--precision: sizes a run of a stationary workload, and the workload spec's"},
		{[]string{"--precision", "0.05", "--autoscale", "hpa", "--max-replicas", "4"}, "the hpa autoscaler changes the fleet while the run goes on"},
	} {
		_, _, err := runCLI(t, append([]string{"run", "-q"}, tc.args...)...)
		require.Error(t, err, "%v", tc.args)
		require.Contains(t, err.Error(), tc.want, "%v", tc.args)
	}
}

type steadyOutput struct {
	Metrics struct {
		Requests struct {
			Arrived  int64 `json:"arrived"`
			Offered  int64 `json:"offered"`
			Injected int64 `json:"injected"`
		} `json:"requests"`
		Stability   *steady.Stability   `json:"stability"`
		SteadyState *steady.SteadyState `json:"steady_state"`
	} `json:"metrics"`
}

func parseSteady(t *testing.T, out string) steadyOutput {
	t.Helper()
	var o steadyOutput
	require.NoError(t, json.Unmarshal([]byte(out), &o))
	require.NotNil(t, o.Metrics.Stability)
	return o
}

// A run sized by precision stops at a checkpoint decided from simulated
// state alone: the same stop, and the same bytes, on one worker or two.
func TestPrecisionStopIsDeterministic(t *testing.T) {
	args := []string{"run", "-q", "--num-instances", "3", "--rate", "40", "--precision", "0.05", "--precision-metric", "e2e_mean_ms"}
	one, _, err := runCLI(t, append(args, "--workers", "1")...)
	require.NoError(t, err)
	two, _, err := runCLI(t, append(args, "--workers", "2")...)
	require.NoError(t, err)
	require.Equal(t, one, two)
	o := parseSteady(t, one)
	s := o.Metrics.Stability.Stop
	require.NotNil(t, s)
	require.Equal(t, steady.StopPrecision, s.Reason, o.Metrics.Stability.Why)
	require.LessOrEqual(t, s.Achieved, 0.05)
	require.Equal(t, s.Arrivals, o.Metrics.Requests.Arrived, "the report counts what arrived before the stop")
	require.Less(t, s.Arrivals, int64(100_000))
	require.Greater(t, s.Arrivals, int64(1000), "--requests is the least length")
	// A single instance too.
	inst, _, err := runCLI(t, "run", "-q", "--rate", "6", "--precision", "0.1", "--precision-metric", "e2e_mean_ms")
	require.NoError(t, err)
	io := parseSteady(t, inst)
	require.Equal(t, steady.StopPrecision, io.Metrics.Stability.Stop.Reason, io.Metrics.Stability.Why)
	require.Equal(t, io.Metrics.Stability.Stop.Arrivals, io.Metrics.Requests.Offered, "offered is what arrived, not the cap")
}

// The caps end a run whose precision is out of reach, and say which; an
// unstable run stops as soon as it is seen to be.
func TestPrecisionCapsAndUnstableStop(t *testing.T) {
	out, stderr, err := runCLI(t, "run", "--num-instances", "2", "--rate", "16", "--precision", "0.0001", "--max-requests", "3000")
	require.NoError(t, err)
	o := parseSteady(t, out)
	require.Equal(t, steady.StopMaxRequests, o.Metrics.Stability.Stop.Reason)
	require.Equal(t, int64(3000), o.Metrics.Requests.Arrived)
	require.Contains(t, stderr, "the cap on arrivals (run.max_requests, --max-requests)")

	out, _, err = runCLI(t, "run", "-q", "--num-instances", "2", "--rate", "16", "--precision", "0.0001", "--max-sim-time", "90s")
	require.NoError(t, err)
	o = parseSteady(t, out)
	require.Equal(t, steady.StopMaxSimTime, o.Metrics.Stability.Stop.Reason)
	require.Less(t, o.Metrics.Requests.Arrived, int64(16*90+200))

	out, stderr, err = runCLI(t, "run", "-q", "--rate", "40", "--precision", "0.05")
	require.NoError(t, err)
	o = parseSteady(t, out)
	require.Equal(t, steady.StopUnstable, o.Metrics.Stability.Stop.Reason)
	require.Equal(t, steady.Unstable, o.Metrics.Stability.Verdict)
	require.Less(t, o.Metrics.Requests.Offered, int64(20_000))
	require.Contains(t, stderr, "warning: unstable")
}

// Ctrl-C during a run sized by precision: a partial report, no stop
// decided by the rule, the run's error.
func TestPrecisionRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs([]string{"run", "--num-instances", "2", "--rate", "16", "--precision", "0.01"})
	require.ErrorIs(t, cmd.ExecuteContext(ctx), errInterrupted)
	var rep struct {
		Partial bool `json:"partial"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.True(t, rep.Partial)
}

// --warmup DURATION removes that much (rounded up to the analysis's time
// bins); none removes nothing.
func TestWarmupGivenOrNone(t *testing.T) {
	out, _, err := runCLI(t, "run", "-q", "--requests", "3000", "--warmup", "30s")
	require.NoError(t, err)
	w := parseSteady(t, out).Metrics.SteadyState.Warmup
	require.Equal(t, "given", w.Rule)
	require.GreaterOrEqual(t, w.RemovedS, 30.0)
	require.Less(t, w.RemovedS, 31.0)
	out, _, err = runCLI(t, "run", "-q", "--requests", "3000", "--warmup", "none")
	require.NoError(t, err)
	w = parseSteady(t, out).Metrics.SteadyState.Warmup
	require.Equal(t, steady.Warmup{Rule: "none"}, w)
}
