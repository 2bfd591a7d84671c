package plural

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOf(t *testing.T) {
	require.Equal(t, "1 instance", Of(1, "instance"))
	require.Equal(t, "0 instances", Of(0, "instance"))
	require.Equal(t, "4 instances", Of(int64(4), "instance"))
	require.Equal(t, "-1 request", Of(int32(-1), "request"))
	require.Equal(t, "2 requests", Of(2, "request"))
	require.Equal(t, "1 request was", Verb(1, "request", "was", "were"))
	require.Equal(t, "0 requests were", Verb(int64(0), "request", "was", "were"))
}
