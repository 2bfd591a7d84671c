package fit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEmptyScores: a score over no sample is NaN, never 0 (a perfect
// score), and the JSON writes it as null beside a note and "samples": 0;
// scores over samples are written exactly as before.
func TestEmptyScores(t *testing.T) {
	for _, c := range []struct {
		name     string
		pred, y  []float64
		wantJSON string
	}{
		{"no samples", nil, nil,
			`{"samples":0,"mape":null,"median_ape":null,"rmse_ms":null,"mae_ms":null,"median_abs_error_ms":null,"max_abs_error_ms":null,"max_over_median_abs_error":null,"note":"no samples: every score is null"}`},
		{"no positive target", []float64{0.001, 0.002}, []float64{0, 0},
			`{"samples":2,"mape":null,"median_ape":null,"rmse_ms":1.5811388300841898,"mae_ms":1.5,"median_abs_error_ms":1.5,"max_abs_error_ms":2,"max_over_median_abs_error":1.3333333333333333,"targets_not_positive":2,"note":"no positive target: mape and median_ape are null"}`},
		{"samples", []float64{0.011, 0.018}, []float64{0.01, 0.02}, ""}, // as encoding/json wrote Errors before
	} {
		t.Run(c.name, func(t *testing.T) {
			var s scorer
			for i := range c.pred {
				s.add(c.pred[i], c.y[i])
			}
			e := s.result()
			if c.wantJSON == "" {
				// Errors as it was declared before it had a MarshalJSON.
				type plain struct {
					N                  int64   `json:"samples"`
					MAPE               float64 `json:"mape"`
					MedianAPE          float64 `json:"median_ape"`
					RMSEms             float64 `json:"rmse_ms"`
					MAEms              float64 `json:"mae_ms"`
					MedianAEms         float64 `json:"median_abs_error_ms"`
					MaxAEms            float64 `json:"max_abs_error_ms"`
					MaxOverMedian      float64 `json:"max_over_median_abs_error"`
					TargetsNotPositive int64   `json:"targets_not_positive,omitempty"`
				}
				old, err := json.Marshal(plain(e))
				require.NoError(t, err)
				c.wantJSON = string(old)
			}
			if len(c.pred) == 0 {
				for _, v := range []float64{e.MAPE, e.MedianAPE, e.RMSEms, e.MAEms, e.MedianAEms, e.MaxAEms, e.MaxOverMedian} {
					require.True(t, math.IsNaN(v), "every score over no sample is NaN: %+v", e)
				}
			}
			got, err := json.Marshal(e)
			require.NoError(t, err)
			require.JSONEq(t, c.wantJSON, string(got))
			require.Equal(t, c.wantJSON, string(got), "keys in struct order")

			// Embedded in ConfigErrors, with the config first and the
			// regimes last, as encoding/json wrote it before.
			ce := ConfigErrors{Config: "a", Errors: e, Regimes: []Errors{e, NoSamples()}}
			got, err = json.Marshal(ce)
			require.NoError(t, err)
			want := `{"config":"a",` + c.wantJSON[1:len(c.wantJSON)-1] + `,"regimes":[` + c.wantJSON + `,` + `{"samples":0,"mape":null,"median_ape":null,"rmse_ms":null,"mae_ms":null,"median_abs_error_ms":null,"max_abs_error_ms":null,"max_over_median_abs_error":null,"note":"no samples: every score is null"}]}`
			require.Equal(t, want, string(got))

			// A vector report over these hold-out errors: its checks fail
			// on an empty score and write its value as null.
			v := VectorReport{Holdout: []ConfigErrors{ce}}
			v.addChecks(true, make([]float64, 16))
			js, err := json.Marshal(v.Checks[:2])
			require.NoError(t, err)
			if math.IsNaN(e.MAPE) {
				require.False(t, v.Checks[0].Pass)
				require.Contains(t, string(js), `"check":"within-config hold-out MAPE","value":null,`)
			} else {
				type plainCheck struct {
					Config    string  `json:"config"`
					Check     string  `json:"check"`
					Value     float64 `json:"value"`
					Threshold string  `json:"threshold"`
					Pass      bool    `json:"pass"`
					Note      string  `json:"note,omitempty"`
				}
				old, err := json.Marshal([]plainCheck{plainCheck(v.Checks[0]), plainCheck(v.Checks[1])})
				require.NoError(t, err)
				require.Equal(t, string(old), string(js), "as encoding/json wrote Check before")
			}
			var md bytes.Buffer
			require.NoError(t, (&Report{Beta: VectorReport{Fitted: true, CV: e, Holdout: []ConfigErrors{ce}, Checks: v.Checks}}).WriteMarkdown(&md, nil))
			line := func(prefix string) string {
				for _, l := range strings.Split(md.String(), "\n") {
					if strings.HasPrefix(l, prefix) {
						return l
					}
				}
				return ""
			}
			cv := line("| cross-validation (training part) |")
			switch c.name {
			case "no samples":
				require.Equal(t, "| cross-validation (training part) | 0 | no samples | | | | | |", cv)
				require.Contains(t, line("| within-config hold-out MAPE"), "| a | none | < 0.15 | **FAIL** |")
			case "no positive target":
				require.True(t, strings.HasPrefix(cv, "| cross-validation (training part) | 2 | no positive target | no positive target | 1.581 |"), cv)
			default:
				require.True(t, strings.HasPrefix(cv, "| cross-validation (training part) | 2 | 10.00 % | 10.00 % | 1.581 |"), cv)
				require.Equal(t, fmt.Sprintf("| cross-validation (training part) | %d | %.2f %% | %.2f %% | %.4g | %.4g | %.4g | %.3g |", e.N, e.MAPE*100, e.MedianAPE*100, e.RMSEms, e.MedianAEms, e.MaxAEms, e.MaxOverMedian), cv, "as before")
			}
			require.NotContains(t, md.String(), "NaN")
		})
	}
}
