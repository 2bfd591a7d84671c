package physics

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// GEMMShapes is a measured table of one GPU type's matrix-multiply rate
// by shape (M rows of activations, N output features, K input features),
// on a full grid of M, N and K. Between the grid's points the rate is
// interpolated in log space (ln rate, trilinear in log2 M, log2 N and
// log2 K); outside it, the nearest edge holds (a GEMM larger than the
// grid runs at the largest one's rate, one with fewer than the smallest M
// at the smallest M's rate, its time then set by its weight read).
//
// The roofline takes from it the share of the card's sustained GEMM rate
// (HardwareSpec.SustainedTFlops) a GEMM of a given shape reaches: Share,
// the rate over the rate of the grid's largest shape. A prefill chunk of
// 512 tokens then runs its projections at a lower share than one of 4,096
// (docs/simulator.md, "GEMM efficiency by shape"). The zero value is not
// valid; ParseGEMMShapes and HardwareSpec.GEMMShapes build one.
type GEMMShapes struct {
	// Name is the table's name ("xla-sm90") or the source it was read from.
	Name string
	// grid holds the grid's values along M, N and K, ascending; lnRate the
	// natural log of the rate in FLOP/s at (grid[0][i], grid[1][j],
	// grid[2][l]), at index (i*len(grid[1])+j)*len(grid[2])+l.
	grid   [3][]float64
	lnRate []float64
	// top is the rate at the grid's largest shape.
	top float64
}

// gemmCache holds the shipped tables, parsed once.
var gemmCache sync.Map

// BuiltinGEMMShapes lists the names of the shipped GEMM tables, sorted.
func BuiltinGEMMShapes() []string {
	entries, err := fs.ReadDir(builtinFS, "data/gemm")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".csv"))
	}
	slices.Sort(names)
	return names
}

// LoadGEMMShapes returns the shipped GEMM table name (BuiltinGEMMShapes).
func LoadGEMMShapes(name string) (*GEMMShapes, error) {
	if g, ok := gemmCache.Load(name); ok {
		return g.(*GEMMShapes), nil
	}
	if !slices.Contains(BuiltinGEMMShapes(), name) {
		return nil, fmt.Errorf("no shipped GEMM table %q (the shipped ones are %s)", name, strings.Join(BuiltinGEMMShapes(), ", "))
	}
	data, err := builtinFS.ReadFile("data/gemm/" + name + ".csv")
	if err != nil {
		return nil, err
	}
	g, err := ParseGEMMShapes(data, "builtin:"+name)
	if err != nil {
		return nil, err
	}
	g.Name = name
	gemmCache.Store(name, g)
	return g, nil
}

// ParseGEMMShapes reads a GEMM table: lines starting with # are comments,
// then the header m,n,k,flops_per_s, then one row per shape, every
// combination of the M, N and K values present exactly once, each value
// a positive integer and each rate positive and finite. Errors name the
// source and line.
func ParseGEMMShapes(data []byte, source string) (*GEMMShapes, error) {
	type row struct{ m, n, k, rate float64 }
	var rows []row
	header := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if !header {
			if text != "m,n,k,flops_per_s" {
				return nil, fmt.Errorf("%s:%d: the header must be m,n,k,flops_per_s, got %q", source, line, text)
			}
			header = true
			continue
		}
		f := strings.Split(text, ",")
		if len(f) != 4 {
			return nil, fmt.Errorf("%s:%d: want 4 fields (m,n,k,flops_per_s), got %d", source, line, len(f))
		}
		var v [4]float64
		for i, s := range f {
			x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || !(x > 0) || math.IsInf(x, 0) || (i < 3 && (x != math.Trunc(x) || x > 1<<30)) {
				return nil, fmt.Errorf("%s:%d: %s must be a positive %s, got %q", source, line, []string{"m", "n", "k", "flops_per_s"}[i],
					map[bool]string{true: "integer up to 2^30", false: "finite number"}[i < 3], s)
			}
			v[i] = x
		}
		rows = append(rows, row{v[0], v[1], v[2], v[3]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no rows (want the header m,n,k,flops_per_s and one row per shape)", source)
	}
	g := &GEMMShapes{Name: source}
	for _, r := range rows {
		for d, x := range [3]float64{r.m, r.n, r.k} {
			if !slices.Contains(g.grid[d], x) {
				g.grid[d] = append(g.grid[d], x)
			}
		}
	}
	for d := range g.grid {
		slices.Sort(g.grid[d])
	}
	nm, nn, nk := len(g.grid[0]), len(g.grid[1]), len(g.grid[2])
	if nm*nn*nk != len(rows) {
		return nil, fmt.Errorf("%s: %d rows do not make a full grid of %d M × %d N × %d K values (every combination once)", source, len(rows), nm, nn, nk)
	}
	g.lnRate = make([]float64, len(rows))
	seen := make([]bool, len(rows))
	for _, r := range rows {
		i := (slices.Index(g.grid[0], r.m)*nn+slices.Index(g.grid[1], r.n))*nk + slices.Index(g.grid[2], r.k)
		if seen[i] {
			return nil, fmt.Errorf("%s: shape m=%g n=%g k=%g is given twice", source, r.m, r.n, r.k)
		}
		seen[i] = true
		g.lnRate[i] = math.Log(r.rate)
	}
	g.top = math.Exp(g.lnRate[len(g.lnRate)-1])
	return g, nil
}

// Rate is the interpolated rate in FLOP/s of an m × k by k × n GEMM.
func (g *GEMMShapes) Rate(m, n, k float64) float64 {
	var idx [3]int
	var frac [3]float64
	for d, x := range [3]float64{m, n, k} {
		idx[d], frac[d] = locate(g.grid[d], x)
	}
	nn, nk := len(g.grid[1]), len(g.grid[2])
	var ln float64
	for c := range 8 {
		w := 1.0
		var at [3]int
		for d := range 3 {
			hi := c>>d&1 == 1
			switch {
			case hi && frac[d] == 0:
				w = 0
			case hi:
				w *= frac[d]
				at[d] = idx[d] + 1
			default:
				w *= 1 - frac[d]
				at[d] = idx[d]
			}
		}
		if w != 0 {
			ln += w * g.lnRate[(at[0]*nn+at[1])*nk+at[2]]
		}
	}
	return math.Exp(ln)
}

// Share is Rate over the rate of the grid's largest shape, in (0, ∞)
// (above 1 where a smaller shape measured faster).
func (g *GEMMShapes) Share(m, n, k float64) float64 { return g.Rate(m, n, k) / g.top }

// locate places x on an ascending grid: the index of the grid point at or
// below it and the fraction of the way to the next, in log2 space; x
// outside the grid is clamped to its ends (fraction 0).
func locate(grid []float64, x float64) (int, float64) {
	switch {
	case !(x > grid[0]):
		return 0, 0
	case x >= grid[len(grid)-1]:
		return len(grid) - 1, 0
	}
	i := 0
	for grid[i+1] <= x {
		i++
	}
	return i, math.Log2(x/grid[i]) / math.Log2(grid[i+1]/grid[i])
}

// Grid is the table's values along dimension d (0: M, 1: N, 2: K),
// ascending. The slice is the table's own: do not modify it.
func (g *GEMMShapes) Grid(d int) []float64 { return g.grid[d] }
