package experiment

// docs/hardening.md, its classes.

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Class 3: a positive capacity wait timeout that rounds to 0 µs would mean
// none; it is refused by key after rounding, and 1 µs is accepted.
func TestCapacityWaitTimeoutValidatedAfterRounding(t *testing.T) {
	_, err := parse(t, "version: 1\ndeployment:\n  router: {capacity_wait_timeout_s: 4e-7}\n")
	require.ErrorContains(t, err, "deployment.router.capacity_wait_timeout_s: 4e-7 s is below 1 µs, the clock's tick, and would round to 0")
	_, err = parse(t, "version: 1\ndeployment:\n  router: {capacity_wait_timeout_s: 1e-6}\n")
	require.NoError(t, err)
}
