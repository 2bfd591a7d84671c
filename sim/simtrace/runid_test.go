package simtrace

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunIDSaltsEveryID: with Options.RunID every request, trace and span
// id is salted: unique within a run, shared by no other run, and RunID 0
// leaves the ids as they were.
func TestRunIDSaltsEveryID(t *testing.T) {
	const n = 2000
	idsOf := func(run uint64, instance string) map[string]int {
		r, inst := runSalt(run), instanceSalt(instance)
		out := map[string]int{}
		for i := range int64(n) {
			api, eng := requestIDs("cmpl-", i, r)
			for _, id := range []string{api, eng, traceID(domainRequest, i, r).String(), spanID(saltAPISpan^r, i).String(),
				spanID(saltCoreSpan^r, i).String(), traceID(domainStep, i+1, inst^r).String(), spanID(saltStepSpan^inst^r, i+1).String()} {
				out[id]++
			}
		}
		return out
	}
	for _, c := range []struct {
		name         string
		runA, runB   uint64
		instA, instB string
		shared       bool
	}{
		{"two runs", 1, 2, "", "", false},
		{"two runs, random ids", 0x9f3c2a17d5e8b641, 0x1b2c3d4e5f607182, "", "", false},
		{"two runs, same instance", 7, 8, "instance_0", "instance_0", false},
		{"a run and no run id", 3, 0, "", "", false},
		{"the same run", 5, 5, "instance_1", "instance_1", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := idsOf(c.runA, c.instA), idsOf(c.runB, c.instB)
			require.Len(t, a, 7*n, "every id unique within a run")
			common := 0
			for id := range a {
				if b[id] > 0 {
					common++
				}
			}
			if c.shared {
				require.Equal(t, len(a), common)
			} else {
				require.Zero(t, common)
			}
		})
	}
	require.Zero(t, runSalt(0), "no run id: the ids of old traces")
}
