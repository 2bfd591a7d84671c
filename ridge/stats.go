package ridge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Stats are the sufficient statistics of weighted least squares over p
// features: X'WX (p×p, symmetric; only the upper triangle is stored and
// updated), X'Wy, y'Wy, Σw and the row count.
//
// Rows that cannot be used (a non-finite x, y or w, or w < 0) are not
// accumulated; they are counted in Bad, and Solve refuses statistics with any
// bad row. Rows with w == 0 are accepted and counted in N but change nothing
// else.
//
// Add buffers up to 8 rows (feature-major, so that the 8 values of a feature
// are adjacent) and folds them into X'WX, X'Wy and y'Wy as one rank-8
// update: each upper-triangle entry is loaded and stored once per 8 rows
// instead of once per row, which roughly halves the cost of Add against
// rank-1 updates. The buffer is invisible: every reader (the accessors,
// AddStats, Sub, Solve, SSE, CrossValidate, MarshalBinary) includes the
// buffered rows without modifying its argument, so reading a Stats never
// writes to it.
//
// The zero value is not usable; call NewStats. A Stats is not safe for
// concurrent writes: give each goroutine its own shard and merge with
// AddStats. Concurrent reads are safe.
type Stats struct {
	p    int
	xtwx []float64 // row-major p×p; element (i, j) with j >= i is valid, the strict lower triangle stays 0
	xtwy []float64 // length p
	ytwy float64
	sumW float64 // includes buffered rows
	n    int64   // accepted rows, including buffered ones
	bad  int64   // rejected rows

	// Rows accepted but not yet folded into xtwx, xtwy and ytwy.
	pend int
	px   []float64 // p×rankK: feature j of buffered row r at px[j*rankK+r]
	py   [rankK]float64
	pw   [rankK]float64 // may be negative: Sub buffers removed rows with −w
}

// rankK is the number of rows Add folds in at once. flush spells out the
// rank-8 update, so rankK must stay 8 (checked at compile time below).
const rankK = 8

var (
	_ [rankK - 8]struct{}
	_ [8 - rankK]struct{}
)

// maxStackP bounds the row copied on the stack when merging buffered rows.
const maxStackP = 64

// NewStats returns empty statistics over p features. It panics if p < 0.
func NewStats(p int) *Stats {
	if p < 0 {
		panic(fmt.Sprintf("ridge: NewStats: negative dimension %d", p))
	}
	return &Stats{
		p:    p,
		xtwx: make([]float64, p*p),
		xtwy: make([]float64, p),
		px:   make([]float64, rankK*p),
	}
}

// P returns the number of features.
func (s *Stats) P() int { return s.p }

// N returns the number of accepted rows (including rows with w == 0).
func (s *Stats) N() int64 { return s.n }

// Bad returns the number of rejected rows: a non-finite x, y or w, or w < 0.
func (s *Stats) Bad() int64 { return s.bad }

// SumW returns Σw over the accepted rows.
func (s *Stats) SumW() float64 { return s.sumW }

// YTWY returns y'Wy.
func (s *Stats) YTWY() float64 {
	v := s.ytwy
	for r := 0; r < s.pend; r++ {
		v += s.pw[r] * s.py[r] * s.py[r]
	}
	return v
}

// XTWY returns element j of X'Wy.
func (s *Stats) XTWY(j int) float64 {
	v := s.xtwy[j]
	for r := 0; r < s.pend; r++ {
		v += s.pw[r] * s.py[r] * s.px[j*rankK+r]
	}
	return v
}

// XTWX returns element (i, j) of the symmetric matrix X'WX.
func (s *Stats) XTWX(i, j int) float64 {
	p := s.p
	if i >= p || j >= p || i < 0 || j < 0 {
		panic(fmt.Sprintf("ridge: XTWX index (%d, %d) out of range for p = %d", i, j, p))
	}
	if j < i {
		i, j = j, i
	}
	v := s.xtwx[i*p+j]
	for r := 0; r < s.pend; r++ {
		v += s.pw[r] * s.px[i*rankK+r] * s.px[j*rankK+r]
	}
	return v
}

// Add accumulates one row with features x, response y and weight w.
// It panics if len(x) != P() (a programmer error). A row with a non-finite
// value or a negative weight is not accumulated but counted in Bad.
// Add does not allocate and touches only the upper triangle of X'WX.
func (s *Stats) Add(x []float64, y, w float64) {
	p := s.p
	if len(x) != p {
		panic(fmt.Sprintf("ridge: Add: len(x) = %d, want %d", len(x), p))
	}
	// Copy x into the buffer slot and check it in the same pass. A float64
	// is non-finite iff its exponent bits are all ones; adding 1 to the
	// exponent field then carries into the sign bit, so the OR of
	// (bits & expMask) + expOne has its top bit set iff some value is
	// non-finite. Integer ops keep the check off the floating-point path.
	acc := (math.Float64bits(y) & expMask) + expOne
	acc |= (math.Float64bits(w) & expMask) + expOne
	if p > 0 {
		r := s.pend
		px := s.px[r : r+rankK*(p-1)+1]
		for j, v := range x {
			acc |= (math.Float64bits(v) & expMask) + expOne
			px[j*rankK] = v
		}
	}
	if acc&signBit != 0 || w < 0 {
		s.bad++
		return
	}
	s.n++
	if w == 0 {
		return
	}
	s.sumW += w
	s.py[s.pend] = y
	s.pw[s.pend] = w
	s.pend++
	if s.pend == rankK {
		s.flush()
	}
}

const (
	expMask = 0x7ff0_0000_0000_0000
	expOne  = 0x0010_0000_0000_0000
	signBit = 0x8000_0000_0000_0000
)

// push buffers a validated row (w may be negative to remove a row) and
// flushes the buffer when it is full.
func (s *Stats) push(x []float64, y, w float64) {
	r := s.pend
	for j, v := range x {
		s.px[j*rankK+r] = v
	}
	s.py[r] = y
	s.pw[r] = w
	s.pend++
	if s.pend == rankK {
		s.flush()
	}
}

// flush folds the buffered rows into xtwx, xtwy and ytwy.
func (s *Stats) flush() {
	p := s.p
	px := s.px[:p*rankK]
	if s.pend == rankK {
		// The weights are read from memory in the outer loop rather than
		// held in registers: with u0..u7 live in the inner loop, holding
		// them too would make the compiler spill inside the inner loop.
		pw := &s.pw
		yv := s.py
		for r := range yv {
			yv[r] *= s.pw[r] // w·y
			s.ytwy += yv[r] * s.py[r]
		}
		xtwy := s.xtwy[:p]
		for i := range xtwy {
			a := px[i*rankK : i*rankK+rankK : i*rankK+rankK]
			xtwy[i] += (yv[0]*a[0] + yv[1]*a[1] + yv[2]*a[2] + yv[3]*a[3]) +
				(yv[4]*a[4] + yv[5]*a[5] + yv[6]*a[6] + yv[7]*a[7])
			u0, u1, u2, u3 := pw[0]*a[0], pw[1]*a[1], pw[2]*a[2], pw[3]*a[3]
			u4, u5, u6, u7 := pw[4]*a[4], pw[5]*a[5], pw[6]*a[6], pw[7]*a[7]
			row := s.xtwx[i*p+i : i*p+p]
			q := px[i*rankK:]
			q = q[:len(row)*rankK]
			for j := range row {
				b := q[j*rankK : j*rankK+rankK : j*rankK+rankK]
				// A balanced tree keeps the dependent chain short.
				row[j] += ((u0*b[0] + u1*b[1]) + (u2*b[2] + u3*b[3])) +
					((u4*b[4] + u5*b[5]) + (u6*b[6] + u7*b[7]))
			}
		}
	} else {
		for r := 0; r < s.pend; r++ {
			w, y := s.pw[r], s.py[r]
			s.ytwy += w * y * y
			for i := 0; i < p; i++ {
				xi := px[i*rankK+r]
				s.xtwy[i] += w * y * xi
				wxi := w * xi
				row := s.xtwx[i*p+i : i*p+p]
				for j := range row {
					row[j] += wxi * px[(i+j)*rankK+r]
				}
			}
		}
	}
	s.pend = 0
}

// AddStats merges the shard o into s. It returns an error (and leaves s
// unchanged) if the dimensions differ. o is not modified.
func (s *Stats) AddStats(o *Stats) error {
	return s.combine(o, 1)
}

// Sub removes the shard o from s, for example train = total − fold. It
// returns an error (and leaves s unchanged) if the dimensions differ.
// Subtraction cancels: entries of s that are much larger than what remains
// lose relative precision (about ε·|total|/|remainder|). o is not modified.
func (s *Stats) Sub(o *Stats) error {
	return s.combine(o, -1)
}

func (s *Stats) combine(o *Stats, sign float64) error {
	if o == nil {
		return errors.New("ridge: nil Stats")
	}
	if o.p != s.p {
		return fmt.Errorf("%w: stats over %d features combined with stats over %d", ErrShape, o.p, s.p)
	}
	if o == s {
		o = s.Clone() // s.AddStats(s) and s.Sub(s) must not read what they write
	}
	p := s.p
	for i := 0; i < p; i++ {
		row := s.xtwx[i*p+i : i*p+p]
		orow := o.xtwx[i*p+i : i*p+p]
		for j := range row {
			row[j] += sign * orow[j]
		}
		s.xtwy[i] += sign * o.xtwy[i]
	}
	s.ytwy += sign * o.ytwy
	s.sumW += sign * o.sumW
	var row [maxStackP]float64
	for r := 0; r < o.pend; r++ {
		x := row[:0]
		if p > maxStackP {
			x = make([]float64, 0, p)
		}
		for j := 0; j < p; j++ {
			x = append(x, o.px[j*rankK+r])
		}
		s.push(x, o.py[r], sign*o.pw[r])
	}
	if sign > 0 {
		s.n += o.n
		s.bad += o.bad
	} else {
		s.n -= o.n
		s.bad -= o.bad
	}
	return nil
}

// Reset empties s, keeping its dimension and storage.
func (s *Stats) Reset() {
	clear(s.xtwx)
	clear(s.xtwy)
	s.ytwy, s.sumW, s.n, s.bad, s.pend = 0, 0, 0, 0, 0
}

// Clone returns a deep copy of s.
func (s *Stats) Clone() *Stats {
	c := NewStats(s.p)
	copy(c.xtwx, s.xtwx)
	copy(c.xtwy, s.xtwy)
	copy(c.px, s.px)
	c.py, c.pw, c.pend = s.py, s.pw, s.pend
	c.ytwy, c.sumW, c.n, c.bad = s.ytwy, s.sumW, s.n, s.bad
	return c
}

// flushed returns s itself if nothing is buffered, else a flushed copy.
func (s *Stats) flushed() *Stats {
	if s.pend == 0 {
		return s
	}
	c := s.Clone()
	c.flush()
	return c
}

// finite reports whether every accumulated statistic of a flushed Stats is
// finite (sums of finite rows can still overflow).
func (s *Stats) finite() bool {
	chk := (s.ytwy - s.ytwy) + (s.sumW - s.sumW)
	p := s.p
	for i := 0; i < p; i++ {
		chk += s.xtwy[i] - s.xtwy[i]
		for _, v := range s.xtwx[i*p+i : i*p+p] {
			chk += v - v
		}
	}
	return chk == 0
}

// statsMagic starts the binary encoding of Stats, version 1.
const statsMagic = "RIDGEST1"

// MarshalBinary encodes s (little-endian: magic, p, n, bad, Σw, y'Wy, X'Wy,
// then the upper triangle of X'WX row by row) so that shards accumulated in
// separate processes can be stored and merged later. Values round-trip
// exactly.
func (s *Stats) MarshalBinary() ([]byte, error) {
	s = s.flushed()
	p := s.p
	size := len(statsMagic) + 8*(5+p+p*(p+1)/2)
	b := make([]byte, 0, size)
	b = append(b, statsMagic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(p))
	b = binary.LittleEndian.AppendUint64(b, uint64(s.n))
	b = binary.LittleEndian.AppendUint64(b, uint64(s.bad))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.sumW))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.ytwy))
	for _, v := range s.xtwy {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	for i := 0; i < p; i++ {
		for _, v := range s.xtwx[i*p+i : i*p+p] {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	return b, nil
}

// maxBinaryP bounds the dimension accepted by UnmarshalBinary.
const maxBinaryP = 1 << 12

// UnmarshalBinary decodes the output of MarshalBinary into s, replacing its
// dimension and contents.
func (s *Stats) UnmarshalBinary(b []byte) error {
	if len(b) < len(statsMagic)+8*5 || string(b[:len(statsMagic)]) != statsMagic {
		return errors.New("ridge: not an encoded Stats (bad magic or too short)")
	}
	b = b[len(statsMagic):]
	u := func() uint64 {
		v := binary.LittleEndian.Uint64(b)
		b = b[8:]
		return v
	}
	p64 := u()
	if p64 > maxBinaryP {
		return fmt.Errorf("ridge: encoded Stats has implausible dimension %d", p64)
	}
	p := int(p64)
	if want := 8 * (4 + p + p*(p+1)/2); len(b) != want {
		return fmt.Errorf("ridge: encoded Stats over %d features has %d bytes after the header, want %d", p, len(b), want)
	}
	n, bad := int64(u()), int64(u())
	if n < 0 || bad < 0 {
		return errors.New("ridge: encoded Stats has a negative row count")
	}
	t := NewStats(p)
	t.n, t.bad = n, bad
	t.sumW = math.Float64frombits(u())
	t.ytwy = math.Float64frombits(u())
	for j := range t.xtwy {
		t.xtwy[j] = math.Float64frombits(u())
	}
	for i := 0; i < p; i++ {
		row := t.xtwx[i*p+i : i*p+p]
		for j := range row {
			row[j] = math.Float64frombits(u())
		}
	}
	*s = *t
	return nil
}
