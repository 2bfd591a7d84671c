package autoscale

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// naiveStabilize is stabilizeRecommendationWithBehaviors as Kubernetes
// writes it: every recording of the longer window kept and scanned.
type naiveStabilize struct {
	up, down int64
	recs     []rec
}

func (h *naiveStabilize) stabilize(now int64, current, desired int) int {
	window, better := h.down, func(a, b int) int { return max(a, b) }
	if desired >= current {
		window, better = h.up, func(a, b int) int { return min(a, b) }
	}
	keep := max(h.up, h.down)
	out := desired
	kept := h.recs[:0]
	for _, r := range h.recs {
		if now-r.at < window {
			out = better(out, r.n)
		}
		if now-r.at < keep {
			kept = append(kept, r)
		}
	}
	h.recs = append(kept, rec{at: now, n: desired})
	return out
}

// The monotonic queues give Kubernetes' scan's answers, and hold few
// recordings: 300 s of a 1 ms interval was 300,000 recordings scanned at
// every evaluation (a scale from zero at interval_s 0.001 ran 2.9
// simulated seconds in 2 minutes).
func TestStabilizeMatchesKubernetesScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		up, down := int64(r.IntN(5))*1000, int64(r.IntN(20))*1000
		if trial%3 == 0 {
			up, down = 0, 300_000_000
		}
		h := NewHPA(HPAConfig{UpWindowUs: up, DownWindowUs: down})
		n := &naiveStabilize{up: up, down: down}
		now := int64(0)
		for range 300 {
			now += int64(r.IntN(3000))
			current, desired := r.IntN(10), r.IntN(10)
			require.Equal(t, n.stabilize(now, current, desired), h.stabilize(now, current, desired), "trial %d at %d µs", trial, now)
		}
	}
	// A steady recommendation keeps one recording per queue.
	h := NewHPA(DefaultHPA(MetricQueueDepth, 1))
	for i := range int64(1_000_000) {
		h.stabilize(i*1000, 3, 3)
	}
	require.LessOrEqual(t, len(h.upMin)+len(h.downMax), 2)
}
