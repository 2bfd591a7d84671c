package steady

// Bins is the run over simulated time in bounded memory: at most maxBins
// equal bins from the first arrival, each with the time integral of the
// number of requests in the system (fleet-wide and per instance), and
// the arrivals, departures and output tokens delivered in it. When the
// bins are full, neighbours merge in pairs and the width doubles, as the
// series' cells do. Departures may be reported before their time (a
// request's completion is known at the end of the step that produces its
// last token, its departure an output delay later): they wait in a heap
// and take effect at their time, so the integrals are exact whatever the
// order of the reports.
type Bins struct {
	started  bool
	t0, w    int64 // the grid's origin and the bins' width, µs
	now      int64 // the integrals reach here
	end      int64 // the open bin's end
	level    int64 // requests in the system now
	cur      bin
	bins     []bin
	inst     []instLevel
	pending  depHeap
	perInst  bool
	instBins [][]int64 // per instance, per closed bin: its integral
}

type bin struct {
	// area is ∫ level dt, in request·µs: integers, so that the sums are
	// exact whatever the steps the clock took.
	area              int64
	arrived, departed int64
	tokens            int64
}

type instLevel struct {
	level int64
	last  int64 // time of the last change within the open bin
	area  int64 // in the open bin
}

type dep struct {
	at   int64
	inst int32
}

// depHeap is a min-heap of departures by time (container/heap's
// algorithm, without its interface: no allocation per departure).
type depHeap []dep

func (h *depHeap) push(d dep) {
	*h = append(*h, d)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].at <= a[i].at {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *depHeap) pop() dep {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	*h = a[:n]
	a = a[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && a[l].at < a[m].at {
			m = l
		}
		if r := l + 1; r < n && a[r].at < a[m].at {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	return top
}

const (
	maxBins = 512
	// firstBinUs is the bins' first width: 1 ms.
	firstBinUs = 1000
)

func (b *Bins) start(t int64) {
	b.started = true
	b.t0, b.w, b.now, b.end = t, firstBinUs, t, t+firstBinUs
	b.bins = make([]bin, 0, maxBins)
}

// advance integrates up to t, applying the departures due before.
func (b *Bins) advance(t int64) {
	for len(b.pending) > 0 && b.pending[0].at <= t {
		d := b.pending.pop()
		b.moveTo(d.at)
		b.level--
		b.cur.departed++
		if d.inst >= 0 {
			b.change(int(d.inst), -1)
		}
	}
	b.moveTo(t)
}

// moveTo integrates the levels up to t, closing the bins that end at or
// before it.
func (b *Bins) moveTo(t int64) {
	if t <= b.now {
		return
	}
	for t >= b.end {
		b.cur.area += b.level * (b.end - b.now)
		b.now = b.end
		b.closeBin()
	}
	b.cur.area += b.level * (t - b.now)
	b.now = t
}

func (b *Bins) closeBin() {
	if b.perInst {
		for i := range b.inst {
			in := &b.inst[i]
			in.area += in.level * (b.end - max(in.last, b.end-b.w))
			b.instBins[i] = append(b.instBins[i], in.area)
			in.area, in.last = 0, b.end
		}
	}
	b.bins = append(b.bins, b.cur)
	b.cur = bin{}
	if len(b.bins) == maxBins {
		for i := range maxBins / 2 {
			x, y := b.bins[2*i], b.bins[2*i+1]
			b.bins[i] = bin{area: x.area + y.area, arrived: x.arrived + y.arrived, departed: x.departed + y.departed, tokens: x.tokens + y.tokens}
		}
		b.bins = b.bins[:maxBins/2]
		for i, ib := range b.instBins {
			for j := range maxBins / 2 {
				ib[j] = ib[2*j] + ib[2*j+1]
			}
			b.instBins[i] = ib[:maxBins/2]
		}
		b.w *= 2
	}
	b.end += b.w
}

// instance makes room for instance i.
func (b *Bins) instance(i int) {
	for len(b.inst) <= i {
		b.inst = append(b.inst, instLevel{last: b.now})
		// An instance added later has no requests in the bins before.
		b.instBins = append(b.instBins, make([]int64, len(b.bins), maxBins))
	}
}

// change moves instance i's level by d at the clock.
func (b *Bins) change(i, d int) {
	b.instance(i)
	in := &b.inst[i]
	in.area += in.level * (b.now - max(in.last, b.end-b.w))
	in.last = b.now
	in.level += int64(d)
}
