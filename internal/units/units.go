// Package units converts physical quantities (seconds, bytes per second,
// gigabytes) to the simulator's integers (microseconds, bytes) in one
// place, with saturation: a plain int64(x) of a float beyond int64's range
// (or NaN) gives an arbitrary value, on amd64 math.MinInt64, so a transfer
// of a gigabyte over a 1e-15 GB/s link once ended 9.2e18 µs before it
// started. Every conversion here instead rounds, then clamps to
// [math.MinInt64, math.MaxInt64], NaN going to math.MaxInt64 (a time that
// never comes), and the durations the core computes from rates are bounded
// by MaxDurationUs, the bound every step and overhead has (sim.Latency's
// clamp), so that no sum of a clock and a duration can overflow.
//
// Refusing an input at its key (a bandwidth so small that nothing would
// ever move) is the input layer's business; these functions keep the core
// well defined whatever reaches it.
package units

import "math"

const (
	// MaxDurationUs bounds one duration of the simulation (a step, an
	// overhead, a transfer, a load): 2^40 µs, about 12.7 days. No real
	// deployment comes near it, and 2^61 (MaxTimeUs) + 2^40 leaves room
	// for every sum.
	MaxDurationUs int64 = 1 << 40
	// MaxTimeUs is the clock's range: 2^61 µs, about 73,000 years.
	MaxTimeUs int64 = 1 << 61
)

// two63 is 2^63, the first float64 beyond int64's range.
const two63 = 0x1p63

// Round is v rounded to the nearest integer (halves away from zero), or
// math.MaxInt64 for NaN and v >= 2^63, math.MinInt64 for v < -2^63.
func Round(v float64) int64 { return clamp(math.Round(v)) }

// Ceil is v rounded up, saturated as Round.
func Ceil(v float64) int64 { return clamp(math.Ceil(v)) }

// Floor is v rounded down, saturated as Round.
func Floor(v float64) int64 { return clamp(math.Floor(v)) }

func clamp(v float64) int64 {
	switch {
	case v != v || v >= two63:
		return math.MaxInt64
	case v < -two63:
		return math.MinInt64
	}
	return int64(v)
}

// SecondsToUs is s seconds in µs, rounded, saturated.
func SecondsToUs(s float64) int64 { return Round(s * 1e6) }

// MsToUs is ms milliseconds in µs, rounded, saturated.
func MsToUs(ms float64) int64 { return Round(ms * 1e3) }

// GBToBytes is gb gigabytes (10^9 bytes) in bytes, rounded, saturated.
func GBToBytes(gb float64) int64 { return Round(gb * 1e9) }

// TransferUs is the time bytes take at bytesPerS, rounded up to the µs,
// within [0, MaxDurationUs]: 0 for no bytes, MaxDurationUs for a rate of
// 0, NaN, or one so small that the time passes the bound.
func TransferUs(bytes, bytesPerS float64) int64 {
	if !(bytes > 0) {
		return 0
	}
	return Duration(Ceil(bytes / bytesPerS * 1e6))
}

// Duration is us clamped into [0, MaxDurationUs].
func Duration(us int64) int64 { return min(max(us, 0), MaxDurationUs) }

// Add is a + b, saturated at math.MaxInt64 and math.MinInt64.
func Add(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}
