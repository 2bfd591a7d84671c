package validate_test

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/validate"
)

var nan = math.NaN()

// pairs makes one pair per (measured, simulated) of metric m, µs; the other
// metrics are unknown in both.
func pairs(m validate.Metric, meas, sim []int64) []validate.Pair {
	out := make([]validate.Pair, len(meas))
	for i := range meas {
		p := validate.Pair{ID: int64(i), Line: int64(i + 1), PromptTokens: 100, OutputTokens: 10,
			MeasTTFT: -1, MeasITL: -1, MeasE2E: -1, SimTTFT: -1, SimITL: -1, SimE2E: -1}
		switch m {
		case validate.TTFT:
			p.MeasTTFT, p.SimTTFT = meas[i], sim[i]
		case validate.ITL:
			p.MeasITL, p.SimITL = meas[i], sim[i]
		case validate.E2E:
			p.MeasE2E, p.SimE2E = meas[i], sim[i]
		}
		out[i] = p
	}
	return out
}

// requireFloat checks got against want within 1e-12, NaN only for NaN.
func requireFloat(t *testing.T, want, got float64, what string) {
	t.Helper()
	if math.IsNaN(want) {
		require.Truef(t, math.IsNaN(got), "%s = %v, want NaN", what, got)
		return
	}
	require.InDeltaf(t, want, got, 1e-12, "%s", what)
}

func requireReport(t *testing.T, want, got validate.MetricReport) {
	t.Helper()
	require.Equal(t, want.Metric, got.Metric)
	require.Equal(t, []int{want.Compared, want.Missing, want.NotSimulated},
		[]int{got.Compared, got.Missing, got.NotSimulated}, "compared, missing, not simulated")
	for _, s := range []struct {
		name      string
		want, got validate.Summary
	}{{"measured", want.Measured, got.Measured}, {"simulated", want.Simulated, got.Simulated}} {
		requireFloat(t, s.want.Mean, s.got.Mean, s.name+" mean")
		requireFloat(t, s.want.P50, s.got.P50, s.name+" p50")
		requireFloat(t, s.want.P90, s.got.P90, s.name+" p90")
		requireFloat(t, s.want.P99, s.got.P99, s.name+" p99")
	}
	requireFloat(t, want.ErrMean, got.ErrMean, "ErrMean")
	requireFloat(t, want.ErrP50, got.ErrP50, "ErrP50")
	requireFloat(t, want.ErrP90, got.ErrP90, "ErrP90")
	requireFloat(t, want.ErrP99, got.ErrP99, "ErrP99")
	requireFloat(t, want.PerRequestMedianAbsErr, got.PerRequestMedianAbsErr, "PerRequestMedianAbsErr")
	requireFloat(t, want.PerRequestMeanAbsErr, got.PerRequestMeanAbsErr, "PerRequestMeanAbsErr")
}

func TestCompare(t *testing.T) {
	nanSummary := validate.Summary{Mean: nan, P50: nan, P90: nan, P99: nan}
	for _, tc := range []struct {
		name   string
		metric validate.Metric
		pairs  []validate.Pair
		want   validate.MetricReport
	}{{
		// Sorted simulated: 1100 2000 3600 4000. Nearest rank of 4: p50 the
		// 2nd, p90 and p99 the 4th. Per-request errors 0.1 0 0.2 0.
		name: "slower: positive error", metric: validate.TTFT,
		pairs: pairs(validate.TTFT, []int64{1000, 2000, 3000, 4000}, []int64{1100, 2000, 3600, 4000}),
		want: validate.MetricReport{Metric: "ttft", Compared: 4,
			Measured:  validate.Summary{Mean: 2.5, P50: 2, P90: 4, P99: 4},
			Simulated: validate.Summary{Mean: 2.675, P50: 2, P90: 4, P99: 4},
			ErrMean:   0.07, PerRequestMedianAbsErr: 0, PerRequestMeanAbsErr: 0.075},
	}, {
		// 10 values: p50 the 5th, p90 the 9th, p99 the 10th.
		name: "faster: negative error", metric: validate.ITL,
		pairs: pairs(validate.ITL, []int64{10000, 9000, 8000, 7000, 6000, 5000, 4000, 3000, 2000, 1000},
			[]int64{8000, 7200, 6400, 5600, 4800, 4000, 3200, 2400, 1600, 800}),
		want: validate.MetricReport{Metric: "itl", Compared: 10,
			Measured:  validate.Summary{Mean: 5.5, P50: 5, P90: 9, P99: 10},
			Simulated: validate.Summary{Mean: 4.4, P50: 4, P90: 7.2, P99: 8},
			ErrMean:   -0.2, ErrP50: -0.2, ErrP90: -0.2, ErrP99: -0.2,
			PerRequestMedianAbsErr: 0.2, PerRequestMeanAbsErr: 0.2},
	}, {
		// Compared: (2000, 3000) and (4000, 4000); p50 of 2 is the 1st.
		name: "missing and not simulated", metric: validate.E2E,
		pairs: pairs(validate.E2E, []int64{-1, 5000, -1, 2000, 4000}, []int64{5000, -1, -1, 3000, 4000}),
		want: validate.MetricReport{Metric: "e2e", Compared: 2, Missing: 2, NotSimulated: 1,
			Measured:  validate.Summary{Mean: 3, P50: 2, P90: 4, P99: 4},
			Simulated: validate.Summary{Mean: 3.5, P50: 3, P90: 4, P99: 4},
			ErrMean:   1.0 / 6, ErrP50: 0.5, PerRequestMedianAbsErr: 0, PerRequestMeanAbsErr: 0.25},
	}, {
		// Measured p50 is 0: its error is NaN; the 0 request has no
		// per-request error.
		name: "measured zero statistic", metric: validate.TTFT,
		pairs: pairs(validate.TTFT, []int64{0, 1000}, []int64{500, 1000}),
		want: validate.MetricReport{Metric: "ttft", Compared: 2,
			Measured:  validate.Summary{Mean: 0.5, P50: 0, P90: 1, P99: 1},
			Simulated: validate.Summary{Mean: 0.75, P50: 0.5, P90: 1, P99: 1},
			ErrMean:   0.5, ErrP50: nan, PerRequestMedianAbsErr: 0, PerRequestMeanAbsErr: 0},
	}, {
		name: "measured all zero", metric: validate.ITL,
		pairs: pairs(validate.ITL, []int64{0, 0}, []int64{100, 300}),
		want: validate.MetricReport{Metric: "itl", Compared: 2,
			Measured:  validate.Summary{},
			Simulated: validate.Summary{Mean: 0.2, P50: 0.1, P90: 0.3, P99: 0.3},
			ErrMean:   nan, ErrP50: nan, ErrP90: nan, ErrP99: nan, PerRequestMedianAbsErr: nan, PerRequestMeanAbsErr: nan},
	}, {
		name: "nothing compared", metric: validate.E2E,
		pairs: pairs(validate.E2E, []int64{-1, 7, -1}, []int64{1, -1, -1}),
		want: validate.MetricReport{Metric: "e2e", Missing: 2, NotSimulated: 1, Measured: nanSummary, Simulated: nanSummary,
			ErrMean: nan, ErrP50: nan, ErrP90: nan, ErrP99: nan, PerRequestMedianAbsErr: nan, PerRequestMeanAbsErr: nan},
	}, {
		name: "no pairs", metric: validate.TTFT,
		want: validate.MetricReport{Metric: "ttft", Measured: nanSummary, Simulated: nanSummary,
			ErrMean: nan, ErrP50: nan, ErrP90: nan, ErrP99: nan, PerRequestMedianAbsErr: nan, PerRequestMeanAbsErr: nan},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := validate.Compare(tc.pairs)
			require.Equal(t, len(tc.pairs), r.Requests)
			require.Len(t, r.Metrics, 3)
			for k, m := range validate.Metrics {
				require.Equal(t, m.String(), r.Metrics[k].Metric)
				if m != tc.metric { // the other metrics are unknown in every pair
					require.Equal(t, len(tc.pairs), r.Metrics[k].Missing)
					require.Zero(t, r.Metrics[k].Compared)
				}
			}
			requireReport(t, tc.want, r.Metrics[tc.metric])
		})
	}
}

func TestCompareLeavesPairsAlone(t *testing.T) {
	ps := pairs(validate.TTFT, []int64{3000, 1000, 2000}, []int64{1000, 3000, 2000})
	orig := append([]validate.Pair(nil), ps...)
	validate.Compare(ps)
	require.Equal(t, orig, ps)
}

func TestMetricString(t *testing.T) {
	for m, want := range map[validate.Metric]string{validate.TTFT: "ttft", validate.ITL: "itl", validate.E2E: "e2e", 7: "Metric(7)"} {
		require.Equal(t, want, m.String())
	}
}

func TestWriteTable(t *testing.T) {
	ps := append(pairs(validate.TTFT, []int64{1000, 2000, 3000, 4000}, []int64{1100, 2000, 3600, 4000}),
		pairs(validate.E2E, []int64{-1, 5000, 8000}, []int64{9000, -1, 4000})...)
	var b bytes.Buffer
	require.NoError(t, validate.Compare(ps).WriteTable(&b))
	out := b.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 5, out) // conventions, header, ttft, itl, e2e
	require.Contains(t, lines[0], "7 requests")
	require.Contains(t, lines[0], "+ is slower")
	for _, col := range []string{"metric", "n", "missing", "not_sim", "meas_mean", "sim_p99", "err_mean", "err_p99", "req_median_abs_err"} {
		require.Contains(t, strings.Fields(lines[1]), col)
	}
	// Aligned: every line of the table has the same width.
	for _, l := range lines[2:] {
		require.Len(t, l, len(lines[1]), out)
		require.Equal(t, l, strings.TrimRight(l, " "), "no trailing blanks")
	}
	ttft := strings.Fields(lines[2])
	require.Equal(t, []string{"ttft", "4", "3", "0", "2.50", "2.00", "4.00", "4.00"}, ttft[:8])
	require.Equal(t, []string{"+7.0%", "+0.0%", "+0.0%", "+0.0%", "0.0%"}, ttft[12:])
	itl := strings.Fields(lines[3])
	require.Equal(t, []string{"itl", "0", "7", "0", "n/a"}, itl[:5])
	require.Equal(t, "n/a", itl[len(itl)-1])
	e2e := strings.Fields(lines[4]) // one compared: (8000, 4000)
	require.Equal(t, []string{"e2e", "1", "5", "1", "8.00"}, e2e[:5])
	require.Equal(t, []string{"-50.0%", "-50.0%", "-50.0%", "-50.0%", "50.0%"}, e2e[12:])
}

func TestJSON(t *testing.T) {
	ps := append(pairs(validate.TTFT, []int64{0, 1000}, []int64{500, 1000}),
		pairs(validate.ITL, []int64{-1}, []int64{-1})...)
	b, err := json.Marshal(validate.Compare(ps))
	require.NoError(t, err)
	var got struct {
		Requests int
		Metrics  []map[string]any
	}
	require.NoError(t, json.Unmarshal(b, &got), string(b))
	require.Equal(t, 3, got.Requests)
	require.Len(t, got.Metrics, 3)
	ttft, itl := got.Metrics[0], got.Metrics[1]
	require.Equal(t, "ttft", ttft["metric"])
	require.InDelta(t, 0.5, ttft["err_mean"], 1e-12)
	require.Nil(t, ttft["err_p50"], "NaN is null")
	require.Contains(t, ttft, "err_p50")
	require.Equal(t, map[string]any{"mean": 0.5, "p50": 0.0, "p90": 1.0, "p99": 1.0}, ttft["measured_ms"])
	require.Equal(t, "itl", itl["metric"])
	require.EqualValues(t, 3, itl["missing"])
	require.Equal(t, map[string]any{"mean": nil, "p50": nil, "p90": nil, "p99": nil}, itl["simulated_ms"])
	require.Nil(t, itl["per_request_median_abs_err"])
}

// randomPairs are n pairs with latencies of 1 µs to 10 s, some unknown.
func randomPairs(r *rand.Rand, n int) []validate.Pair {
	v := func() int64 {
		if r.IntN(10) == 0 {
			return -1
		}
		return 1 + r.Int64N(10_000_000)
	}
	ps := make([]validate.Pair, n)
	for i := range ps {
		ps[i] = validate.Pair{ID: int64(i), MeasTTFT: v(), MeasITL: v(), MeasE2E: v(), SimTTFT: v(), SimITL: v(), SimE2E: v()}
	}
	return ps
}

func TestIdenticalHasNoError(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		ps := randomPairs(r, 1+r.IntN(300))
		for i := range ps {
			ps[i].SimTTFT, ps[i].SimITL, ps[i].SimE2E = ps[i].MeasTTFT, ps[i].MeasITL, ps[i].MeasE2E
		}
		rep := validate.Compare(ps)
		for _, m := range rep.Metrics {
			require.Zero(t, m.NotSimulated)
			if m.Compared == 0 {
				continue
			}
			for _, e := range []float64{m.ErrMean, m.ErrP50, m.ErrP90, m.ErrP99, m.PerRequestMedianAbsErr, m.PerRequestMeanAbsErr} {
				require.Equalf(t, 0.0, e, "trial %d %s", trial, m.Metric)
			}
			require.Equal(t, m.Measured, m.Simulated)
		}
	}
}

func TestErrMeanProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(20240601, 7))
	for trial := range 200 {
		ps := randomPairs(r, 1+r.IntN(500))
		rep := validate.Compare(ps)
		for k, m := range validate.Metrics {
			mr := rep.Metrics[k]
			var sumMeas, sumSim float64
			var n, missing, notSim int
			for i := range ps {
				a, b := ps[i].Values(m)
				switch {
				case a == -1:
					missing++
				case b == -1:
					notSim++
				default:
					sumMeas += float64(a)
					sumSim += float64(b)
					n++
				}
			}
			require.Equal(t, []int{n, missing, notSim}, []int{mr.Compared, mr.Missing, mr.NotSimulated})
			require.Equal(t, len(ps), mr.Compared+mr.Missing+mr.NotSimulated)
			if n == 0 {
				require.True(t, math.IsNaN(mr.ErrMean))
				continue
			}
			meanMeas, meanSim := sumMeas/float64(n), sumSim/float64(n)
			require.InDeltaf(t, (meanSim-meanMeas)/meanMeas, mr.ErrMean, 1e-12, "trial %d %s", trial, m)
			require.InDelta(t, meanMeas/1e3, mr.Measured.Mean, 1e-9)
			require.LessOrEqual(t, mr.Measured.P50, mr.Measured.P90)
			require.LessOrEqual(t, mr.Measured.P90, mr.Measured.P99)
		}
	}
}

func TestWritePlot(t *testing.T) {
	ps := randomPairs(rand.New(rand.NewPCG(3, 4)), 400)
	for _, format := range validate.Formats {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, validate.WritePlot(&b, ps, "validation of a test run", format))
			require.NotZero(t, b.Len())
			switch format {
			case "png":
				img, err := png.Decode(bytes.NewReader(b.Bytes()))
				require.NoError(t, err)
				require.Equal(t, 1152, img.Bounds().Dx())
				require.Equal(t, 432, img.Bounds().Dy())
			case "svg":
				s := b.String()
				require.Contains(t, s, "</svg>")
				for _, label := range []string{"validation of a test run", "measured TTFT (s)", "simulated mean ITL (ms)", "E2E, "} {
					require.Contains(t, s, label)
				}
			case "pdf":
				// 12 × 4.5 inches; no date of writing (see internal/plotcanvas).
				s := b.String()
				require.True(t, strings.HasPrefix(s, "%PDF-"))
				require.True(t, strings.Contains(s, "/MediaBox [0 0 864.00 324.00]"))
				require.True(t, strings.Contains(s, "/CreationDate (D:19700101000000)"))
			default:
				t.Fatalf("no check for format %s", format)
			}
			// The same pairs, the same bytes.
			var again bytes.Buffer
			require.NoError(t, validate.WritePlot(&again, ps, "validation of a test run", format))
			require.Equal(t, b.Bytes(), again.Bytes())
		})
	}
}

func TestWritePlotErrors(t *testing.T) {
	ps := pairs(validate.TTFT, []int64{1000}, []int64{2000})
	var b bytes.Buffer
	require.ErrorContains(t, validate.WritePlot(&b, ps, "", "gif"), `image format "gif" is not one of png, svg, pdf`)
	none := pairs(validate.E2E, []int64{-1, 1000}, []int64{1000, -1})
	require.ErrorContains(t, validate.WritePlot(&b, none, "", "png"), "no request has both")
	require.Zero(t, b.Len(), "nothing written")
}
