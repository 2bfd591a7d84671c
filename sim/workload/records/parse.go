package records

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"time"

	clipq "github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/sim"
)

var (
	errNotNumber = errors.New("not a number")
	errRange     = errors.New("out of range")
)

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseScaled reads a decimal number (JSON's syntax, also with a leading
// '+') and returns it times 10^scale, rounded to the nearest integer with
// halves away from zero. The digits never pass through a float, so a
// timestamp of 1787267980.0827403 s is 1787267980082740300 ns exactly.
func parseScaled(s string, scale int) (int64, error) {
	p := 0
	neg := false
	if p < len(s) && (s[p] == '-' || s[p] == '+') {
		neg = s[p] == '-'
		p++
	}
	is := p
	for p < len(s) && isDigit(s[p]) {
		p++
	}
	intDigits, frac := s[is:p], ""
	if p < len(s) && s[p] == '.' {
		p++
		fs := p
		for p < len(s) && isDigit(s[p]) {
			p++
		}
		frac = s[fs:p]
	}
	if len(intDigits)+len(frac) == 0 {
		return 0, errNotNumber
	}
	exp := 0
	if p < len(s) && (s[p] == 'e' || s[p] == 'E') {
		p++
		eneg := false
		if p < len(s) && (s[p] == '-' || s[p] == '+') {
			eneg = s[p] == '-'
			p++
		}
		es := p
		for p < len(s) && isDigit(s[p]) {
			if exp < 1000 { // beyond that the value is 0 or out of range anyway
				exp = exp*10 + int(s[p]-'0')
			}
			p++
		}
		if p == es {
			return 0, errNotNumber
		}
		if eneg {
			exp = -exp
		}
	}
	if p != len(s) {
		return 0, errNotNumber
	}
	n := len(intDigits) + len(frac)
	digit := func(k int) int64 {
		if k >= n {
			return 0
		}
		if k < len(intDigits) {
			return int64(intDigits[k] - '0')
		}
		return int64(frac[k-len(intDigits)] - '0')
	}
	// The value is the digit string times 10^(exp+scale-len(frac)); its
	// first keep digits are the integer part.
	keep := n + exp + scale - len(frac)
	var v int64
	for k := 0; k < keep; k++ {
		d := digit(k)
		if v > (math.MaxInt64-d)/10 {
			return 0, errRange
		}
		v = v*10 + d
	}
	if keep >= 0 && keep < n && digit(keep) >= 5 {
		if v == math.MaxInt64 {
			return 0, errRange
		}
		v++
	}
	if neg {
		v = -v
	}
	return v, nil
}

// present says whether a raw JSON field holds a value (absent and null do not).
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

func isNumber(raw json.RawMessage) bool {
	return len(raw) > 0 && (raw[0] == '-' || isDigit(raw[0]))
}

// count reads a required token count; zero is skipped for zeroReason.
func count(raw json.RawMessage, field, zeroReason string) (int64, *rowError) {
	if !present(raw) {
		return 0, bad(SkipMissingField, field, "missing")
	}
	if !isNumber(raw) {
		return 0, bad(SkipBadNumber, field, "%s is not a number", clip(raw))
	}
	return checkCount(string(raw), field, zeroReason)
}

// checkCount parses a token count: an integer in [1, sim.MaxTokens].
func checkCount(s, field, zeroReason string) (int64, *rowError) {
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return 0, bad(SkipBadNumber, field, "%q is not an integer", clipString(s))
	case v < 0:
		return 0, bad(SkipNegative, field, "%d is negative", v)
	case v == 0:
		return 0, bad(zeroReason, field, "0 must be > 0")
	case v > sim.MaxTokens:
		return 0, bad(SkipTooManyTokens, field, "%d is more than the simulator takes (%d)", v, int64(sim.MaxTokens))
	}
	return v, nil
}

// seconds reads a required time or duration in seconds as ns.
func seconds(raw json.RawMessage, field string) (int64, *rowError) {
	return scaled(raw, field, 9)
}

// scaled reads a required JSON number times 10^scale.
func scaled(raw json.RawMessage, field string, scale int) (int64, *rowError) {
	if !present(raw) {
		return 0, bad(SkipMissingField, field, "missing")
	}
	if !isNumber(raw) {
		return 0, bad(SkipBadNumber, field, "%s is not a number", clip(raw))
	}
	v, err := parseScaled(string(raw), scale)
	if err != nil {
		return 0, bad(SkipBadNumber, field, "%s is %v", clip(raw), err)
	}
	return v, nil
}

// secondsList reads a JSON array of times in seconds as ns.
func secondsList(raw json.RawMessage, field string) ([]int64, *rowError) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, bad(SkipBadNumber, field, "not an array of numbers")
	}
	out := make([]int64, len(items))
	for i, it := range items {
		v, e := seconds(it, field)
		if e != nil {
			if e.reason == SkipMissingField {
				e = bad(SkipBadNumber, field, "element %d is null", i)
			}
			return nil, e
		}
		out[i] = v
	}
	return out, nil
}

// typeError names the field of a JSON type mismatch.
func typeError(err error) *rowError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return bad(SkipMalformed, te.Field, "a JSON %s where the format has %s", te.Value, jsonKind(te.Type.Kind().String()))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return bad(SkipMalformed, "", "not JSON: %v", err)
	}
	return bad(SkipMalformed, "", "not a JSON object of the format: %v", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	}
	return "a value of another type"
}

// clip shortens a value for a message.
func clip(raw json.RawMessage) string { return clipString(string(raw)) }

func clipString(s string) string { return clipq.String(s) }

// eachLine calls fn with every line of src that is not blank and its
// 1-based line number. Blank lines are neither rows nor skips.
func eachLine(src io.Reader, fn func(line int64, b []byte) error) error {
	br := bufio.NewReaderSize(src, 1<<16)
	var n int64
	for {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			n++
			if t := bytes.TrimSpace(b); len(t) > 0 {
				if n == 1 {
					t = bytes.TrimPrefix(t, []byte("\ufeff"))
				}
				if err := fn(n, t); err != nil {
					return err
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// parseDateTime reads "YYYY-MM-DD HH:MM:SS" (or with a T), an optional
// fraction of up to 9 digits and an optional zone (Z, ±HH, ±HH:MM, ±HHMM;
// none means UTC), as ns since the Unix epoch, exactly.
func parseDateTime(s string) (int64, bool) {
	if len(s) < 19 {
		return 0, false
	}
	num := func(from, to int) (int, bool) {
		v := 0
		for i := from; i < to; i++ {
			if !isDigit(s[i]) {
				return 0, false
			}
			v = v*10 + int(s[i]-'0')
		}
		return v, true
	}
	y, ok1 := num(0, 4)
	mo, ok2 := num(5, 7)
	d, ok3 := num(8, 10)
	h, ok4 := num(11, 13)
	mi, ok5 := num(14, 16)
	sec, ok6 := num(17, 19)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	if mo < 1 || mo > 12 || d < 1 || d > time.Date(y, time.Month(mo)+1, 0, 0, 0, 0, 0, time.UTC).Day() || h > 23 || mi > 59 || sec > 59 {
		return 0, false
	}
	rest := s[19:]
	var fracNs int64
	if len(rest) > 0 && rest[0] == '.' {
		i := 1
		for i < len(rest) && isDigit(rest[i]) {
			i++
		}
		digits := rest[1:i]
		if len(digits) == 0 || len(digits) > 9 {
			return 0, false
		}
		for k := range 9 {
			fracNs *= 10
			if k < len(digits) {
				fracNs += int64(digits[k] - '0')
			}
		}
		rest = rest[i:]
	}
	var offset int64 // seconds east of UTC
	switch {
	case rest == "" || rest == "Z":
	case rest[0] == '+' || rest[0] == '-':
		z := rest[1:]
		var hh, mm int
		var ok bool
		switch {
		case len(z) == 2:
			hh, ok = atoi2(z)
		case len(z) == 5 && z[2] == ':':
			hh, ok = atoi2(z[:2])
			if ok {
				mm, ok = atoi2(z[3:])
			}
		case len(z) == 4:
			hh, ok = atoi2(z[:2])
			if ok {
				mm, ok = atoi2(z[2:])
			}
		}
		if !ok || hh > 23 || mm > 59 {
			return 0, false
		}
		offset = int64(hh*3600 + mm*60)
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return 0, false
	}
	unix := time.Date(y, time.Month(mo), d, h, mi, sec, 0, time.UTC).Unix() - offset
	// int64 ns reach the years 1678 to 2262.
	if unix > math.MaxInt64/1_000_000_000-1 || unix < math.MinInt64/1_000_000_000+1 {
		return 0, false
	}
	return unix*1e9 + fracNs, true
}

func atoi2(s string) (int, bool) {
	if len(s) != 2 || !isDigit(s[0]) || !isDigit(s[1]) {
		return 0, false
	}
	return int(s[0]-'0')*10 + int(s[1]-'0'), true
}

// dupKey reports the first key a JSON object names twice at its top level
// (false when none is, or b is not an object: Unmarshal says what is wrong
// then). It scans bytes without allocating, so a row costs one more pass;
// encoding/json keeps the last copy of a key silently (docs/hardening.md, class 7).
func dupKey(b []byte) (string, bool) {
	i := 0
	ws := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	// str scans the string at b[i] == '"' and returns its raw bytes.
	str := func() ([]byte, bool) {
		start := i + 1
		for i++; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				i++
				return b[start : i-1], true
			}
		}
		return nil, false
	}
	ws()
	if i >= len(b) || b[i] != '{' {
		return "", false
	}
	i++
	var keys [][]byte
	for {
		ws()
		if i >= len(b) || b[i] != '"' {
			return "", false // '}' or malformed
		}
		k, ok := str()
		if !ok {
			return "", false
		}
		for _, o := range keys {
			if bytes.Equal(o, k) {
				return string(k), true
			}
		}
		keys = append(keys, k)
		ws()
		if i >= len(b) || b[i] != ':' {
			return "", false
		}
		i++
		// Skip the value: strings whole, brackets by depth.
		depth := 0
		for ; i < len(b); i++ {
			c := b[i]
			if c == '"' {
				if _, ok := str(); !ok {
					return "", false
				}
				i--
				continue
			}
			if c == '{' || c == '[' {
				depth++
			} else if c == '}' || c == ']' {
				if depth == 0 {
					break
				}
				depth--
			} else if c == ',' && depth == 0 {
				break
			}
		}
		if i >= len(b) || b[i] != ',' {
			return "", false // the object's end (or malformed)
		}
		i++
	}
}
