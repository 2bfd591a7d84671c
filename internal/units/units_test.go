package units

import (
	"math"
	"testing"
)

// TestConversionsSaturate: every conversion of a float beyond int64's range,
// or NaN, saturates instead of wrapping (a plain int64(1e300) is
// math.MinInt64 on amd64), and values in range round as math does.
func TestConversionsSaturate(t *testing.T) {
	for _, c := range []struct {
		name string
		got  int64
		want int64
	}{
		{"round", Round(2.5), 3},
		{"round negative", Round(-2.5), -3},
		{"round NaN", Round(math.NaN()), math.MaxInt64},
		{"round +Inf", Round(math.Inf(1)), math.MaxInt64},
		{"round -Inf", Round(math.Inf(-1)), math.MinInt64},
		{"round 1e300", Round(1e300), math.MaxInt64},
		{"round 2^63", Round(0x1p63), math.MaxInt64},
		{"round below 2^63", Round(0x1p63 - 1024), math.MaxInt64 - 1023},
		{"round -2^63", Round(-0x1p63), math.MinInt64},
		{"ceil", Ceil(1.000001), 2},
		{"ceil 1e19", Ceil(1e19), math.MaxInt64},
		{"floor", Floor(-0.5), -1},
		{"seconds", SecondsToUs(1.5), 1_500_000},
		{"seconds 1e300", SecondsToUs(1e300), math.MaxInt64},
		{"seconds sub-µs", SecondsToUs(1e-7), 0},
		{"ms", MsToUs(0.0015), 2},
		{"GB", GBToBytes(1.5), 1_500_000_000},
		{"GB 1e300", GBToBytes(1e300), math.MaxInt64},
		{"transfer", TransferUs(1e9, 1e9), 1_000_000},
		{"transfer rounds up", TransferUs(1, 3e6), 1},
		{"transfer no bytes", TransferUs(0, 0), 0},
		{"transfer 1e-15 GB/s", TransferUs(5e8, 1e-15*1e9), MaxDurationUs},
		{"transfer rate 0", TransferUs(1, 0), MaxDurationUs},
		{"transfer rate NaN", TransferUs(1, math.NaN()), MaxDurationUs},
		{"transfer subnormal rate", TransferUs(1, 1e-300*1e-15), MaxDurationUs},
		{"add", Add(3, 4), 7},
		{"add saturates", Add(math.MaxInt64-1, 2), math.MaxInt64},
		{"add saturates low", Add(math.MinInt64+1, -2), math.MinInt64},
		{"duration", Duration(-5), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
}
