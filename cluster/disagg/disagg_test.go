package disagg

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDeciders(t *testing.T) {
	for _, tc := range []struct {
		name              string
		threshold         int64
		prompt, nonCached int64
		want              bool
	}{
		{NeverName, 0, 4000, 4000, false},
		{AlwaysName, 0, 10, 0, true},
		{PrefixThresholdName, DefaultPrefixThreshold, 2000, 17, true},
		{PrefixThresholdName, DefaultPrefixThreshold, 2000, 16, false}, // "exceed": 16 is not more than 16
		{PrefixThresholdName, DefaultPrefixThreshold, 2000, 0, false},
		{PrefixThresholdName, 0, 2000, 1, true},
	} {
		d, err := New(tc.name, tc.threshold)
		require.NoError(t, err)
		require.Equal(t, tc.name, d.Name())
		require.Equal(t, tc.want, d.Disaggregate(tc.prompt, tc.nonCached), "%+v", tc)
	}
	_, err := New("sometimes", 0)
	require.ErrorContains(t, err, "not one of never, always, prefix-threshold")
	// A negative threshold breaks New's precondition (the template's
	// threshold is range-checked where it is read: policy's tests).
	require.PanicsWithValue(t, "disagg: prefix-threshold's threshold -1 is not >= 0 tokens", func() { _, _ = New(PrefixThresholdName, -1) })
}
