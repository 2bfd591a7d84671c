package fit

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blis-sim/blis/coefficients"
)

// A held-out split (calibrate fit --holdout-after T) leaves the end of the
// traces out of the fit altogether, so that the simulator can be validated
// on requests the coefficients never saw (blis validate --from). It is
// placed in wall-clock time, the one clock the processes of a deployment
// share: a request by its arrival (coefficients.Holdout.HeldOut), a step
// by its start, which the tables give on its engine's monotonic clock only
// and which is put on the wall clock by that engine's offset between the
// two clocks, taken from its requests' QUEUED events (both clocks are read
// when the event is emitted).

// ResolveHoldout turns T into an instant (Unix ns) over the traces'
// arrivals: a duration after the first arrival ("600s", "10m"), a share of
// the span from the first arrival to the last ("80%"), or an RFC 3339
// time ("2026-01-01T00:10:00Z"). The split must leave requests on both
// sides.
func ResolveHoldout(spec string, traces []*Trace) (int64, error) {
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	for _, tr := range traces {
		for i := range tr.Requests {
			if at := placedAt(&tr.Requests[i]); at >= 0 {
				first, last = min(first, at), max(last, at)
			}
		}
	}
	if first > last {
		return 0, errors.New("no request of the traces has a wall-clock arrival or QUEUED time to place the split by")
	}
	usage := "give a duration after the first arrival (600s, 10m), a share of the trace from its first arrival to its last (80%), or an RFC 3339 time (2026-01-01T00:10:00Z)"
	var cut int64
	switch s := strings.TrimSpace(spec); {
	case strings.HasSuffix(s, "%"):
		p, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err != nil || math.IsNaN(p) || p <= 0 || p >= 100 {
			return 0, fmt.Errorf("%q: a share must be in (0%%, 100%%); %s", spec, usage)
		}
		cut = first + int64(math.Round(p/100*float64(last-first)))
	case strings.ContainsAny(s, "T:") && len(s) >= 19:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, fmt.Errorf("%q: %v; %s", spec, err, usage)
		}
		cut = t.UnixNano()
	default:
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%q: not a positive duration; %s", spec, usage)
		}
		if d > time.Duration(last-first) {
			return 0, fmt.Errorf("%q: the traces' arrivals span %s, so nothing would be held out; %s", spec, time.Duration(last-first).Round(time.Millisecond), usage)
		}
		cut = first + int64(d)
	}
	switch {
	case cut < first:
		return 0, fmt.Errorf("%q (%s) is before the first arrival (%s): every request would be held out",
			spec, coefficients.FormatInstant(cut), coefficients.FormatInstant(first))
	case cut >= last:
		return 0, fmt.Errorf("%q (%s) is at or after the last arrival (%s): no request would be held out",
			spec, coefficients.FormatInstant(cut), coefficients.FormatInstant(last))
	}
	return cut, nil
}

func placedAt(r *RequestRow) int64 {
	if r.ArrivedWallNs >= 0 {
		return r.ArrivedWallNs
	}
	return r.QueuedWallNs
}

// HoldOut removes from the trace the requests held out at the split (see
// coefficients.Holdout.HeldOut), and the steps that started after it with
// their snapshots; it returns how many requests and steps it removed. It
// fails when an engine with steps has no request to put its monotonic
// clock on the wall clock.
func (tr *Trace) HoldOut(h *coefficients.Holdout) (requests, steps int64, err error) {
	// Each engine's wall − monotonic offset: the median over its requests'
	// QUEUED events (the median shrugs off a request whose two readings
	// straddle a clock step).
	diffs := make([][]int64, len(tr.Instances))
	for i := range tr.Requests {
		r := &tr.Requests[i]
		if r.QueuedWallNs >= 0 && r.QueuedNs >= 0 {
			diffs[r.Inst] = append(diffs[r.Inst], r.QueuedWallNs-r.QueuedNs)
		}
	}
	offset := make([]int64, len(tr.Instances))
	for inst, d := range diffs {
		if len(d) > 0 {
			slices.Sort(d)
			offset[inst] = d[len(d)/2]
		}
	}
	keptReq := tr.Requests[:0]
	for _, r := range tr.Requests {
		if h.HeldOut(r.ArrivedWallNs, r.QueuedWallNs) {
			requests++
			continue
		}
		keptReq = append(keptReq, r)
	}
	tr.Requests = keptReq
	type stepKey struct {
		inst int32
		id   int64
	}
	out := map[stepKey]bool{}
	keptSteps := tr.Steps[:0]
	for _, s := range tr.Steps {
		if len(diffs[s.Inst]) == 0 {
			return 0, 0, fmt.Errorf("%s: the steps of engine %q cannot be placed on the wall clock: none of its requests has both QUEUED times (queued_wall_ns, queued_mono_ns)",
				tr.Dir, tr.Instances[s.Inst])
		}
		if s.TsStartNs+offset[s.Inst] > h.AfterUnixNs {
			steps++
			out[stepKey{s.Inst, s.ID}] = true
			continue
		}
		keptSteps = append(keptSteps, s)
	}
	tr.Steps = keptSteps
	keptSnap := tr.Snapshots[:0]
	for _, sn := range tr.Snapshots {
		if !out[stepKey{sn.Inst, sn.StepID}] {
			keptSnap = append(keptSnap, sn)
		}
	}
	tr.Snapshots = keptSnap
	return requests, steps, nil
}

// HoldOutTraces resolves T over the traces (ResolveHoldout), removes what
// the split holds out from each (HoldOut) and returns its record, for the
// coefficient file's provenance.
func HoldOutTraces(traces []*Trace, spec string) (*coefficients.Holdout, error) {
	cut, err := ResolveHoldout(spec, traces)
	if err != nil {
		return nil, err
	}
	h := coefficients.NewHoldout(cut, 0, 0)
	for _, tr := range traces {
		r, s, err := tr.HoldOut(h)
		if err != nil {
			return nil, err
		}
		h.Requests += r
		h.Steps += s
	}
	return h, nil
}
