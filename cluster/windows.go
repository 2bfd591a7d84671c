package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/blis-sim/blis/sim"
)

// Time windows (Config.WindowUs = D > 0): the run is cut into windows
// [k·D, (k+1)·D) of simulated time, aligned at time 0, from the window of
// the first arrival to the window of the last event processed (or of the
// horizon, when the run stopped there with events left). Each window
// counts the requests that arrived in it and those that left in it (at
// their departure, by outcome), and samples the cluster's state at its end
// (k+1)·D: after every event before that instant and before any event at
// it, so that an event at exactly (k+1)·D belongs to the next window, as
// the half-open interval says. Nothing changes between events, so the
// state read when the clock first reaches or passes (k+1)·D is the state
// at (k+1)·D; scrapes of the instance-reported signals follow the same
// rule. Memory is one row per window and one TTFT histogram, reused.

// maxWindows bounds the rows of a run, so that a window too short for the
// run fails with a clear error instead of exhausting memory.
const maxWindows = 1 << 20

// ErrTooManyWindows is the error of a run that would need more than
// maxWindows time windows.
var ErrTooManyWindows = errors.New("too many time windows")

// Window is one time window of a cluster run: what happened in
// [StartUs, EndUs) and the cluster's state at EndUs. Rows are written by
// WriteWindowsCSV and WriteWindowsJSONL, whose columns WindowColumns
// lists; a new field (per SLO class or tenant, say) needs a column there.
type Window struct {
	StartUs, EndUs int64
	// Arrived counts the requests that arrived in the window; each was
	// admitted or rejected at once, in the same window.
	Arrived, Admitted, Rejected int64
	// Completed, Dropped (refused by its instance: unservable, or longer
	// than the model's context) and TimedOut count the requests that left
	// in the window, at their departure.
	Completed, Dropped, TimedOut int64
	// OutputTokens are the output tokens of the requests completed in the
	// window.
	OutputTokens int64
	// TTFTP50Us and TTFTP99Us are the TTFT percentiles of the requests
	// completed in the window (by completion window, not arrival window),
	// in µs from a histogram (within 0.1 %); 0 when none completed.
	TTFTP50Us, TTFTP99Us int64
	// The state at EndUs: waiting requests (QueueDepth) and running ones
	// (Running) summed over the instances, the instances' mean and maximum
	// KV utilization, and the router's in-flight requests (routed and not
	// yet departed).
	QueueDepth, Running   int64
	KVUtilMean, KVUtilMax float64
	InFlight              int64
	// PromptTokens and GenerationTokens are what vLLM's
	// vllm:prompt_tokens_total and vllm:generation_tokens_total counters
	// (sim.Status) grew by in the window, summed over the instances: the
	// per-second rates vLLM's own stat logger prints.
	PromptTokens, GenerationTokens int64
	// Killed counts the requests a scale-down ended in the window.
	Killed int64
	// The fleet at EndUs: instances ready, starting (pending, loading or
	// warming) and draining; and what its nodes cost in the window (their
	// GPU-hours × the pools' prices; 0 without prices).
	ReplicasReady, ReplicasStarting, ReplicasDraining int64
	Cost                                              float64
	// InSystem is the requests in the system at EndUs: admitted and not
	// yet left (the backlog whose trend the stability verdict reads);
	// Warmup marks a window that ends within the warm-up the output
	// analysis removed (Config.Analysis; package steady).
	InSystem int64
	Warmup   bool
}

// windowSample is the cluster's state at a window's end.
type windowSample struct {
	queue, running, inflight int64
	kvMean, kvMax            float64
	prompt, generation       int64 // the counters' totals
	ready, starting, drain   int64
	cost                     float64 // billed since the start
}

// windower accumulates the open window and keeps the closed ones.
type windower struct {
	// counted are the token counters' and cost's totals at the last
	// window's end.
	counted struct {
		prompt, generation int64
		cost               float64
	}
	d       int64
	end     int64 // the open window's end
	started bool  // the first event has opened a window
	cur     Window
	ttft    sim.Histogram
	rows    []Window
	// inSystem is the requests admitted and not yet left, at the open
	// window's start.
	inSystem int64
}

func newWindower(d int64) *windower { return &windower{d: d, end: math.MaxInt64} }

// start opens the window holding t, the first event's time.
func (w *windower) start(t int64) {
	w.started = true
	w.end = satAdd(t-t%w.d, w.d)
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// left counts a request that left at the open window's time.
func (w *windower) left(ev *cevent) {
	switch ev.out {
	case Completed:
		w.cur.Completed++
		w.cur.OutputTokens += ev.tokens
		w.ttft.Add(ev.ttftUs)
	case Dropped, TooLong:
		w.cur.Dropped++
	case TimedOut:
		w.cur.TimedOut++
	case Killed:
		w.cur.Killed++
	}
}

// close ends the open window with the state s and opens the next one.
func (w *windower) close(s *windowSample) {
	r := w.cur
	r.StartUs, r.EndUs = w.end-w.d, w.end
	if w.ttft.Count() > 0 {
		r.TTFTP50Us, r.TTFTP99Us = w.ttft.Quantile(0.50), w.ttft.Quantile(0.99)
		w.ttft.Reset()
	}
	r.QueueDepth, r.Running, r.InFlight = s.queue, s.running, s.inflight
	r.KVUtilMean, r.KVUtilMax = s.kvMean, s.kvMax
	r.PromptTokens, r.GenerationTokens = s.prompt-w.counted.prompt, s.generation-w.counted.generation
	w.counted.prompt, w.counted.generation = s.prompt, s.generation
	r.ReplicasReady, r.ReplicasStarting, r.ReplicasDraining = s.ready, s.starting, s.drain
	r.Cost, w.counted.cost = s.cost-w.counted.cost, s.cost
	w.inSystem += r.Admitted - r.Completed - r.Dropped - r.TimedOut - r.Killed
	r.InSystem = w.inSystem
	w.rows = append(w.rows, r)
	w.cur = Window{}
	w.end = satAdd(w.end, w.d)
}

// sampleWindow reads the state the windows record: each engine's status
// and the router's in-flight counts, in instance order.
func (c *Sim) sampleWindow() windowSample {
	var s windowSample
	var kv float64
	for i, e := range c.eng {
		st := e.Status()
		s.queue += st.QueueDepth
		s.running += st.BatchSize
		s.inflight += c.inflight[i]
		kv += st.KVUtilization
		s.kvMax = max(s.kvMax, st.KVUtilization)
		s.prompt += st.PromptTokens
		s.generation += st.GenerationTokens
	}
	if f := c.folds; f != nil {
		s.prompt += f.promptCtr
		s.generation += f.genCtr
	}
	s.kvMean = kv / float64(max(1, len(c.eng)))
	if c.fl != nil {
		s.ready, s.starting, s.drain = c.fl.Sample()
	} else {
		s.ready = int64(len(c.eng))
	}
	return s
}

// closeWindows closes every window that ends at or before t. It is called
// before any event at t is processed, when every engine has processed its
// events before t and none at or after t (parallel windows stop at the
// open window's end: bound), so the state it samples is the state at each
// of those ends.
func (c *Sim) closeWindows(t int64) { c.closeWindowsUpTo(t, t) }

// closeWindowsUpTo is closeWindows billing the fleet up to each window's
// end, but not past last (the run's end): the cost of a window depends on
// its bounds only, not on when the loop happened to close it.
func (c *Sim) closeWindowsUpTo(t, last int64) {
	w := c.win
	n := (t-w.end)/w.d + 1
	if int64(len(w.rows))+n > maxWindows {
		c.err = fmt.Errorf("%w: the run reached %d µs, which needs more than %d windows of %d µs; use a longer window", ErrTooManyWindows, t, maxWindows, w.d)
		return
	}
	s := c.sampleWindow()
	for ; n > 0; n-- {
		if c.fl != nil {
			_, s.cost = c.fl.Billed(min(w.end, last))
		}
		w.close(&s)
	}
}

// finishWindows closes the windows up to and including the one that holds
// the run's last instant: the last event processed, or the horizon when
// the run stopped there with events left (nothing happened in between).
// The last window's state is the final state.
func (c *Sim) finishWindows() {
	w := c.win
	if !w.started || c.err != nil {
		return
	}
	last := c.now
	if at, ok := c.NextEventUs(); ok && c.cfg.HorizonUs > 0 && at > c.cfg.HorizonUs {
		last = max(last, c.cfg.HorizonUs)
	}
	// Every window that ends at or before last, and the one holding it.
	c.closeWindowsUpTo(satAdd(last-last%w.d, w.d), last)
	w.started = false // closed: a second Finish adds nothing
}

// windowColumn is one column of the window files: an integer or a
// floating-point value of a row; a float column's ok false leaves the
// cell empty (CSV) or null (JSON).
type windowColumn struct {
	name  string
	int   func(w *Window) int64
	float func(w *Window) (v float64, ok bool)
}

// perS is a count per second of the window.
func perS(w *Window, n int64) float64 { return float64(n) * 1e6 / float64(w.EndUs-w.StartUs) }

var windowColumns = []windowColumn{
	{name: "start_us", int: func(w *Window) int64 { return w.StartUs }},
	{name: "end_us", int: func(w *Window) int64 { return w.EndUs }},
	{name: "arrived", int: func(w *Window) int64 { return w.Arrived }},
	{name: "admitted", int: func(w *Window) int64 { return w.Admitted }},
	{name: "rejected", int: func(w *Window) int64 { return w.Rejected }},
	{name: "completed", int: func(w *Window) int64 { return w.Completed }},
	{name: "dropped", int: func(w *Window) int64 { return w.Dropped }},
	{name: "timed_out", int: func(w *Window) int64 { return w.TimedOut }},
	{name: "output_tokens", int: func(w *Window) int64 { return w.OutputTokens }},
	{name: "arrived_per_s", float: func(w *Window) (float64, bool) { return perS(w, w.Arrived), true }},
	{name: "completed_per_s", float: func(w *Window) (float64, bool) { return perS(w, w.Completed), true }},
	{name: "output_tokens_per_s", float: func(w *Window) (float64, bool) { return perS(w, w.OutputTokens), true }},
	{name: "ttft_p50_ms", float: func(w *Window) (float64, bool) { return float64(w.TTFTP50Us) / 1000, w.Completed > 0 }},
	{name: "ttft_p99_ms", float: func(w *Window) (float64, bool) { return float64(w.TTFTP99Us) / 1000, w.Completed > 0 }},
	{name: "queue_depth", int: func(w *Window) int64 { return w.QueueDepth }},
	{name: "running", int: func(w *Window) int64 { return w.Running }},
	{name: "kv_utilization_mean", float: func(w *Window) (float64, bool) { return w.KVUtilMean, true }},
	{name: "kv_utilization_max", float: func(w *Window) (float64, bool) { return w.KVUtilMax, true }},
	{name: "in_flight", int: func(w *Window) int64 { return w.InFlight }},
	{name: "prompt_tokens", int: func(w *Window) int64 { return w.PromptTokens }},
	{name: "generation_tokens", int: func(w *Window) int64 { return w.GenerationTokens }},
	{name: "killed", int: func(w *Window) int64 { return w.Killed }},
	{name: "replicas_ready", int: func(w *Window) int64 { return w.ReplicasReady }},
	{name: "replicas_starting", int: func(w *Window) int64 { return w.ReplicasStarting }},
	{name: "replicas_draining", int: func(w *Window) int64 { return w.ReplicasDraining }},
	{name: "cost", float: func(w *Window) (float64, bool) { return w.Cost, true }},
	{name: "in_system", int: func(w *Window) int64 { return w.InSystem }},
	{name: "warmup", int: func(w *Window) int64 {
		if w.Warmup {
			return 1
		}
		return 0
	}},
}

// WindowColumns are the columns of the window files, in order: the CSV
// header and the JSON keys. Rates are per second of the window; TTFT is
// empty (CSV) or null (JSON) in a window where no request completed.
func WindowColumns() []string {
	names := make([]string, len(windowColumns))
	for i, c := range windowColumns {
		names[i] = c.name
	}
	return names
}

// appendValue appends column c's value in w, or nothing when it has none.
func (c *windowColumn) appendValue(b []byte, w *Window) ([]byte, bool) {
	if c.int != nil {
		return strconv.AppendInt(b, c.int(w), 10), true
	}
	v, ok := c.float(w)
	if !ok {
		return b, false
	}
	// encoding/json's choice of notation: plain unless tiny or huge.
	f := byte('f')
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		f = 'e'
	}
	return strconv.AppendFloat(b, v, f, -1, 64), true
}

// appendJSON appends w as one JSON object with the columns' keys.
func (w *Window) appendJSON(b []byte) []byte {
	b = append(b, '{')
	for i := range windowColumns {
		c := &windowColumns[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, c.name...)
		b = append(b, '"', ':')
		var ok bool
		if b, ok = c.appendValue(b, w); !ok {
			b = append(b, "null"...)
		}
	}
	return append(b, '}')
}

// MarshalJSON writes the window as WriteWindowsJSONL does, so that every
// JSON form of a window has the same keys.
func (w Window) MarshalJSON() ([]byte, error) { return w.appendJSON(nil), nil }

// WriteWindowsCSV writes a header line of WindowColumns and one line per
// window.
func WriteWindowsCSV(out io.Writer, rows []Window) error {
	bw := bufio.NewWriter(out)
	var b []byte
	for i, c := range windowColumns {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, c.name...)
	}
	b = append(b, '\n')
	for k := range rows {
		if _, err := bw.Write(b); err != nil {
			return err
		}
		b = b[:0]
		for i := range windowColumns {
			if i > 0 {
				b = append(b, ',')
			}
			b, _ = windowColumns[i].appendValue(b, &rows[k])
		}
		b = append(b, '\n')
	}
	if _, err := bw.Write(b); err != nil {
		return err
	}
	return bw.Flush()
}

// WriteWindowsJSONL writes one JSON object per window and line, with the
// keys of WindowColumns in their order.
func WriteWindowsJSONL(out io.Writer, rows []Window) error {
	bw := bufio.NewWriter(out)
	var b []byte
	for k := range rows {
		b = append(rows[k].appendJSON(b[:0]), '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}
