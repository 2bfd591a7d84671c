package autoscale

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// naiveStabilize is stabilizeRecommendationWithBehaviors as Kubernetes
// writes it (pkg/controller/podautoscaler/horizontal.go): every recording
// of the longer window kept and scanned, the lowest of the up window and
// the highest of the down window (this recommendation included) bounding
// the current size; the first call records the current size first
// (recordInitialRecommendation).
type naiveStabilize struct {
	up, down int64
	recs     []rec
	started  bool
}

func (h *naiveStabilize) stabilize(now int64, current, desired int) int {
	if !h.started {
		h.started = true
		h.recs = append(h.recs, rec{at: now, n: current})
	}
	keep := max(h.up, h.down)
	upRec, downRec := desired, desired
	kept := h.recs[:0]
	for _, r := range h.recs {
		if now-r.at < h.up {
			upRec = min(upRec, r.n)
		}
		if now-r.at < h.down {
			downRec = max(downRec, r.n)
		}
		if now-r.at < keep {
			kept = append(kept, r)
		}
	}
	h.recs = append(kept, rec{at: now, n: desired})
	recommendation := current
	if recommendation < upRec {
		recommendation = upRec
	}
	if recommendation > downRec {
		recommendation = downRec
	}
	return recommendation
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

// TestStabilizeNeverMovesTheOtherWay: the cases where taking the window's
// extreme as the answer (the code before) differed from Kubernetes, which
// brings the current size within the windows' bounds: a scale-down
// recommendation under an older, higher one kept the size (it scaled up to
// the older one), a scale-up under an older, lower one in a non-zero up
// window kept it too (it scaled down); and the first evaluation keeps the
// size for a down window (it scaled down at once).
func TestStabilizeNeverMovesTheOtherWay(t *testing.T) {
	for _, tc := range []struct {
		name     string
		up, down int64
		steps    [][3]int // at (s), current, desired
		want     []int
	}{
		{"scale-down under an older higher recommendation", 0, 300, [][3]int{{0, 4, 10}, {15, 6, 5}, {30, 6, 2}}, []int{10, 6, 6}},
		{"scale-up under an older lower recommendation", 60, 0, [][3]int{{0, 8, 2}, {15, 4, 6}, {75, 4, 6}}, []int{2, 4, 6}},
		{"the first evaluation keeps the size for the down window", 0, 300, [][3]int{{15, 96, 64}, {300, 96, 64}, {314, 96, 64}, {315, 96, 64}}, []int{96, 96, 96, 64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHPA(HPAConfig{UpWindowUs: tc.up * 1e6, DownWindowUs: tc.down * 1e6})
			for k, st := range tc.steps {
				require.Equal(t, tc.want[k], h.stabilize(int64(st[0])*1e6, st[1], st[2]), "step %d", k)
			}
		})
	}
}
