// Package flagerr words a command line's flag values that do not parse
// as the value's kind, for blis and calibrate alike: "--seeds: want a
// whole number, got 1.5" rather than pflag's "invalid argument "1.5" for
// "--seeds" flag: strconv.ParseInt: parsing "1.5": invalid syntax". The
// flag is named first, as every other refusal names it; the value is
// quoted clipped (internal/clip). A flag's range is checked where it is
// declared, after it parsed: this package only says what kind of value
// the flag takes.
package flagerr

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blis-sim/blis/internal/clip"
)

// kinds says, by pflag's type name, what a flag of that type takes.
var kinds = map[string]string{
	"int":          "a whole number",
	"int8":         "a whole number",
	"int16":        "a whole number",
	"int32":        "a whole number",
	"int64":        "a whole number",
	"uint":         "a whole number >= 0",
	"uint8":        "a whole number >= 0",
	"uint16":       "a whole number >= 0",
	"uint32":       "a whole number >= 0",
	"uint64":       "a whole number >= 0",
	"count":        "a whole number",
	"float32":      "a number",
	"float64":      "a number",
	"bool":         "true or false",
	"duration":     "a duration (30s, 500ms, 2m)",
	"intSlice":     "whole numbers separated by commas",
	"int32Slice":   "whole numbers separated by commas",
	"int64Slice":   "whole numbers separated by commas",
	"uintSlice":    "whole numbers >= 0 separated by commas",
	"float32Slice": "numbers separated by commas",
	"float64Slice": "numbers separated by commas",
	"boolSlice":    "true or false, separated by commas",
}

// durationShape is a duration time.ParseDuration refuses only for its
// size (999999999h).
var durationShape = regexp.MustCompile(`^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)$`)

// Rewrite is a cobra FlagErrorFunc: a value that does not parse as its
// flag's kind is refused naming the flag and the kind; other errors
// (an unknown flag, a missing value) pass unchanged.
func Rewrite(_ *cobra.Command, err error) error {
	var bad *pflag.InvalidValueError
	if !errors.As(err, &bad) {
		return err
	}
	f := bad.GetFlag()
	kind, ok := kinds[f.Value.Type()]
	if !ok {
		kind = "a " + f.Value.Type()
	}
	value := bad.GetValue()
	why := ""
	if strings.Contains(bad.Unwrap().Error(), "value out of range") || (f.Value.Type() == "duration" && durationShape.MatchString(value)) {
		why = " (beyond the range of the flag's type)"
	} else if x, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil && strings.Contains(kind, "whole") {
		switch {
		case math.IsNaN(x) || math.IsInf(x, 0):
			why = " (a finite whole number)"
		case x != math.Trunc(x):
			why = " (fractions are not rounded)"
		case math.Abs(x) >= 1<<63:
			why = " (beyond the range of the flag's type)"
		default:
			why = " (write it in digits)"
		}
	}
	return fmt.Errorf("--%s: want %s, got %q%s", f.Name, kind, clip.String(value), why)
}
