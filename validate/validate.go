// Package validate compares the per-request latencies measured in a real
// vLLM run with the ones the simulator produced for the same requests.
//
// For each metric, TTFT, mean ITL (the mean time per output token after the
// first, vLLM's TPOT) and E2E, Compare takes the requests where both values
// are known and reports for measured and simulated alike the mean and the
// 50th, 90th and 99th percentiles, the relative error of each of these
// statistics, and the median and mean of the per-request relative errors.
// WriteTable prints a Report as an aligned text table; WritePlot draws
// simulated against measured values, one point per request.
//
// Conventions and invariants:
//   - A Pair holds integer µs. A negative value (by convention -1) is
//     unknown: a measured one because the trace does not give it, a
//     simulated one because the request did not complete in the simulation.
//   - For every metric each request is counted in exactly one of Compared
//     (both values known), Missing (measured unknown, whatever the
//     simulated) and NotSimulated (measured known, simulated unknown):
//     Compared + Missing + NotSimulated = Requests.
//   - Summary statistics are in ms. Means are float64 sums of the µs values
//     (exact below 2^53 µs) divided by their number.
//   - Percentiles are nearest-rank: the q-th percentile of n values is the
//     value of 1-based rank ceil(q·n/100) in ascending order, computed in
//     integers; it is always one of the values. The per-request median is
//     the 50th percentile in the same sense (the lower of the two middle
//     values when n is even). Measured and simulated use the same
//     definition.
//   - Errors are signed fractions (simulated - measured) / measured of a
//     statistic: +0.05 means the simulation is 5 % slower (a higher latency)
//     than measured, a negative error that it is faster. An error is NaN
//     when the measured statistic is 0 or nothing was compared. The
//     per-request errors are absolute, |simulated - measured| / measured,
//     over the compared requests with measured > 0, NaN when there are none.
//     When every simulated value equals its measured one, every error is
//     exactly 0.
//   - NaN is printed "n/a" by WriteTable and encoded as null by the
//     MarshalJSON methods of Summary and MetricReport, so a Report always
//     encodes with encoding/json (the encoding is one-way: null does not
//     decode back to NaN).
//   - Everything is deterministic: pairs are read in their order and
//     metrics are always TTFT, ITL, E2E.
package validate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// Pair is one request: what was measured and what the simulator produced,
// µs. A measured value of -1 means the record does not have it; a simulated
// -1 means the request did not complete in the simulation (it is counted,
// not compared).
type Pair struct {
	ID                         int64 // request index or id, for per-request output
	Line                       int64 // the record's line in its file
	PromptTokens, OutputTokens int64
	// MeasITL and SimITL are the mean time per output token after the first.
	MeasTTFT, MeasITL, MeasE2E int64
	SimTTFT, SimITL, SimE2E    int64
}

// Metric is one of the compared latencies.
type Metric int

// The metrics, in the order of Report.Metrics.
const (
	TTFT Metric = iota // time to first token
	ITL                // mean time per output token after the first
	E2E                // end to end
	numMetrics
)

// Metrics are all metrics in report order.
var Metrics = []Metric{TTFT, ITL, E2E}

// String is "ttft", "itl" or "e2e".
func (m Metric) String() string {
	switch m {
	case TTFT:
		return "ttft"
	case ITL:
		return "itl"
	case E2E:
		return "e2e"
	}
	return fmt.Sprintf("Metric(%d)", int(m))
}

// Values are the pair's measured and simulated value of m, µs (-1: unknown);
// it panics for a Metric that is not one of Metrics.
func (p *Pair) Values(m Metric) (meas, sim int64) {
	switch m {
	case TTFT:
		return p.MeasTTFT, p.SimTTFT
	case ITL:
		return p.MeasITL, p.SimITL
	case E2E:
		return p.MeasE2E, p.SimE2E
	}
	panic(fmt.Sprintf("validate: unknown metric %d", int(m)))
}

// Summary is the mean and the nearest-rank percentiles of a metric over the
// compared requests, ms; NaN when none was compared.
type Summary struct{ Mean, P50, P90, P99 float64 }

// MetricReport are the statistics of one metric over the compared requests.
type MetricReport struct {
	Metric       string // Metric.String()
	Compared     int    // pairs where both values are known
	Missing      int    // pairs where the measured value is unknown
	NotSimulated int    // pairs with a measured value where the simulated one is unknown
	// Measured and Simulated summarize the compared pairs' values, ms.
	Measured, Simulated Summary
	// The signed error (simulated - measured) / measured of each statistic;
	// NaN when the measured statistic is 0 or nothing was compared.
	ErrMean, ErrP50, ErrP90, ErrP99 float64
	// The median and mean of |simulated - measured| / measured over the
	// compared requests with measured > 0; NaN when there are none.
	PerRequestMedianAbsErr, PerRequestMeanAbsErr float64
}

// Report is the comparison of all pairs.
type Report struct {
	Requests int            `json:"requests"`
	Metrics  []MetricReport `json:"metrics"` // Metrics[m] is metric m: TTFT, ITL, E2E
}

// Compare computes the report of pairs.
func Compare(pairs []Pair) Report {
	r := Report{Requests: len(pairs), Metrics: make([]MetricReport, numMetrics)}
	var meas, sim []int64
	var rel []float64
	for _, m := range Metrics {
		mr := MetricReport{Metric: m.String()}
		meas, sim, rel = meas[:0], sim[:0], rel[:0]
		for i := range pairs {
			a, b := pairs[i].Values(m)
			switch {
			case a < 0:
				mr.Missing++
			case b < 0:
				mr.NotSimulated++
			default:
				meas, sim = append(meas, a), append(sim, b)
				if a > 0 {
					rel = append(rel, math.Abs(float64(b-a))/float64(a))
				}
			}
		}
		mr.Compared = len(meas)
		ms, ss := summarize(meas), summarize(sim) // mean, p50, p90, p99 in µs
		errs := [4]*float64{&mr.ErrMean, &mr.ErrP50, &mr.ErrP90, &mr.ErrP99}
		for k := range errs {
			*errs[k] = relErr(ss[k], ms[k])
		}
		mr.Measured = Summary{ms[0] / 1e3, ms[1] / 1e3, ms[2] / 1e3, ms[3] / 1e3}
		mr.Simulated = Summary{ss[0] / 1e3, ss[1] / 1e3, ss[2] / 1e3, ss[3] / 1e3}
		mr.PerRequestMedianAbsErr, mr.PerRequestMeanAbsErr = math.NaN(), math.NaN()
		if len(rel) > 0 {
			var sum float64
			for _, e := range rel {
				sum += e
			}
			mr.PerRequestMeanAbsErr = sum / float64(len(rel))
			slices.Sort(rel)
			mr.PerRequestMedianAbsErr = rel[rank(50, len(rel))]
		}
		r.Metrics[m] = mr
	}
	return r
}

// rank is the 0-based index of the nearest-rank q-th percentile of n > 0
// sorted values: ceil(q·n/100) - 1, at least 0.
func rank(q, n int) int { return max(0, (q*n+99)/100-1) }

// summarize is the mean, p50, p90 and p99 of v in µs, all NaN for no value.
// It sorts v.
func summarize(v []int64) [4]float64 {
	if len(v) == 0 {
		return [4]float64{math.NaN(), math.NaN(), math.NaN(), math.NaN()}
	}
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	slices.Sort(v)
	n := len(v)
	return [4]float64{sum / float64(n), float64(v[rank(50, n)]), float64(v[rank(90, n)]), float64(v[rank(99, n)])}
}

// relErr is (sim - meas) / meas, NaN when meas is 0 or either is NaN.
func relErr(sim, meas float64) float64 {
	if meas == 0 || math.IsNaN(meas) || math.IsNaN(sim) {
		return math.NaN()
	}
	return (sim - meas) / meas
}

// nullable is nil for NaN, for JSON null.
func nullable(x float64) *float64 {
	if math.IsNaN(x) {
		return nil
	}
	return &x
}

// MarshalJSON writes {"mean","p50","p90","p99"} in ms, null for NaN.
func (s Summary) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Mean *float64 `json:"mean"`
		P50  *float64 `json:"p50"`
		P90  *float64 `json:"p90"`
		P99  *float64 `json:"p99"`
	}{nullable(s.Mean), nullable(s.P50), nullable(s.P90), nullable(s.P99)})
}

// MarshalJSON writes the report with snake_case keys, null for NaN.
func (m MetricReport) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Metric                 string   `json:"metric"`
		Compared               int      `json:"compared"`
		Missing                int      `json:"missing"`
		NotSimulated           int      `json:"not_simulated"`
		Measured               Summary  `json:"measured_ms"`
		Simulated              Summary  `json:"simulated_ms"`
		ErrMean                *float64 `json:"err_mean"`
		ErrP50                 *float64 `json:"err_p50"`
		ErrP90                 *float64 `json:"err_p90"`
		ErrP99                 *float64 `json:"err_p99"`
		PerRequestMedianAbsErr *float64 `json:"per_request_median_abs_err"`
		PerRequestMeanAbsErr   *float64 `json:"per_request_mean_abs_err"`
	}{m.Metric, m.Compared, m.Missing, m.NotSimulated, m.Measured, m.Simulated,
		nullable(m.ErrMean), nullable(m.ErrP50), nullable(m.ErrP90), nullable(m.ErrP99),
		nullable(m.PerRequestMedianAbsErr), nullable(m.PerRequestMeanAbsErr)})
}

// tableHeader are WriteTable's columns.
var tableHeader = []string{"metric", "n", "missing", "not_sim",
	"meas_mean", "meas_p50", "meas_p90", "meas_p99",
	"sim_mean", "sim_p50", "sim_p90", "sim_p99",
	"err_mean", "err_p50", "err_p90", "err_p99", "req_median_abs_err"}

// WriteTable writes a line on the conventions, then a right-aligned table
// with a row per metric: the number compared, missing and not simulated,
// the measured and the simulated mean, p50, p90 and p99 in ms, the signed
// error of each in %, and the per-request median absolute error in %.
func (r Report) WriteTable(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "%d requests; latencies in ms; err = (simulated - measured) / measured, + is slower than measured\n", r.Requests); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(cells []string) {
		fmt.Fprint(tw, strings.Join(cells, "\t")+"\t\n")
	}
	row(tableHeader)
	for _, m := range r.Metrics {
		cells := []string{m.Metric, fmt.Sprint(m.Compared), fmt.Sprint(m.Missing), fmt.Sprint(m.NotSimulated)}
		for _, s := range []Summary{m.Measured, m.Simulated} {
			for _, x := range []float64{s.Mean, s.P50, s.P90, s.P99} {
				cells = append(cells, format(x, "%.2f"))
			}
		}
		for _, x := range []float64{m.ErrMean, m.ErrP50, m.ErrP90, m.ErrP99} {
			cells = append(cells, format(100*x, "%+.1f%%"))
		}
		row(append(cells, format(100*m.PerRequestMedianAbsErr, "%.1f%%")))
	}
	return tw.Flush()
}

// format prints x with verb, "n/a" for NaN.
func format(x float64, verb string) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf(verb, x)
}
