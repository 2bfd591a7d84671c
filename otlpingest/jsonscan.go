package otlpingest

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is a pull parser over one JSON text held in memory. It stops at
// the first error (kept in err; later calls return zero values), so callers
// check err once at the end. Strings without escapes are returned as slices
// of the input and allocate nothing.
type scanner struct {
	data  []byte
	pos   int
	err   error
	buf   []byte // unescaped string scratch, valid until the next str call
	depth int
}

// maxDepth bounds the nesting that skip follows, so that hostile input
// cannot exhaust the stack.
const maxDepth = 256

func (s *scanner) reset(data []byte) {
	s.data, s.pos, s.err = data, 0, nil
}

func (s *scanner) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("offset %d: %s", s.pos, fmt.Sprintf(format, args...))
	}
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.err != nil || s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

func (s *scanner) expect(c byte) bool {
	if s.peek() != c {
		if s.err == nil {
			if s.pos >= len(s.data) {
				s.fail("unexpected end of input, want %q", c)
			} else {
				s.fail("want %q, got %q", c, s.data[s.pos])
			}
		}
		return false
	}
	s.pos++
	return true
}

// object starts an object; iterate with key(&first).
func (s *scanner) object() bool { return s.expect('{') }

// key returns the next key of the current object, or false at its end.
func (s *scanner) key(first *bool) ([]byte, bool) {
	c := s.peek()
	if s.err != nil {
		return nil, false
	}
	if c == '}' {
		s.pos++
		return nil, false
	}
	if !*first && !s.expect(',') {
		return nil, false
	}
	*first = false
	k := s.str()
	if !s.expect(':') {
		return nil, false
	}
	return k, s.err == nil
}

// array starts an array; iterate with elem(&first).
func (s *scanner) array() bool { return s.expect('[') }

func (s *scanner) elem(first *bool) bool {
	c := s.peek()
	if s.err != nil {
		return false
	}
	if c == ']' {
		s.pos++
		return false
	}
	if !*first && !s.expect(',') {
		return false
	}
	*first = false
	return s.err == nil
}

// fields calls fn with each key of an object; fn must consume the value.
// A null stands for an empty object.
func (s *scanner) fields(fn func(key []byte)) {
	if s.null() || !s.object() {
		return
	}
	for first := true; ; {
		k, ok := s.key(&first)
		if !ok {
			return
		}
		fn(k)
	}
}

// items calls fn for each element of an array; fn must consume it. A null
// stands for an empty array.
func (s *scanner) items(fn func()) {
	if s.null() || !s.array() {
		return
	}
	for first := true; s.elem(&first); {
		fn()
	}
}

// null consumes a null and reports whether there was one.
func (s *scanner) null() bool {
	if s.peek() == 'n' && s.pos+4 <= len(s.data) && string(s.data[s.pos:s.pos+4]) == "null" {
		s.pos += 4
		return true
	}
	return false
}

// str reads a string. The result aliases the input or the scratch buffer.
func (s *scanner) str() []byte {
	if !s.expect('"') {
		return nil
	}
	start := s.pos
	for i := start; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			s.pos = i + 1
			return s.data[start:i]
		case c == '\\':
			return s.strEscaped(start)
		case c < 0x20:
			s.pos = i
			s.fail("control character in string")
			return nil
		}
	}
	s.pos = len(s.data)
	s.fail("unterminated string")
	return nil
}

func (s *scanner) strEscaped(start int) []byte {
	b := append(s.buf[:0], s.data[start:s.pos]...)
	i := s.pos
	for i < len(s.data) {
		c := s.data[i]
		switch {
		case c == '"':
			s.pos = i + 1
			s.buf = b
			return b
		case c < 0x20:
			s.pos = i
			s.fail("control character in string")
			return nil
		case c != '\\':
			b = append(b, c)
			i++
			continue
		}
		if i+1 >= len(s.data) {
			break
		}
		e := s.data[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, n := s.hex4(i)
			if n == 0 {
				return nil
			}
			i += n
			if utf16.IsSurrogate(r) {
				if i+6 <= len(s.data) && s.data[i] == '\\' && s.data[i+1] == 'u' {
					if r2, n2 := s.hex4(i + 2); n2 > 0 {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							r = d
							i += 2 + n2
						}
					}
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			s.pos = i - 1
			s.fail("invalid escape \\%c", e)
			return nil
		}
	}
	s.pos = len(s.data)
	s.fail("unterminated string")
	return nil
}

func (s *scanner) hex4(i int) (rune, int) {
	if i+4 > len(s.data) {
		s.pos = i
		s.fail("short \\u escape")
		return 0, 0
	}
	var r rune
	for _, c := range s.data[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			s.pos = i
			s.fail("invalid \\u escape")
			return 0, 0
		}
	}
	return r, 4
}

// number returns the raw text of a number literal, checked against the
// JSON grammar -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *scanner) number() []byte {
	s.ws()
	d := s.data
	start, i := s.pos, s.pos
	digits := func() bool {
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case !digits():
		s.pos = i
		if i >= len(d) {
			s.fail("unexpected end of input, want a number")
		} else {
			s.fail("want a number, got %q", d[i])
		}
		return nil
	}
	if i < len(d) && d[i] == '.' {
		i++
		if !digits() {
			s.pos = i
			s.fail("want digits after the decimal point")
			return nil
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			s.pos = i
			s.fail("want digits in the exponent")
			return nil
		}
	}
	s.pos = i
	return d[start:i]
}

// numText reads a number given as a JSON number or a JSON string, as the
// OTLP JSON mapping allows for 64-bit integers and doubles.
func (s *scanner) numText() []byte {
	if s.peek() == '"' {
		return s.str()
	}
	return s.number()
}

var errRange = errors.New("out of range")

func parseUint(b []byte) (uint64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, errRange
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			// Numbers such as 1e9 or 5.0 are valid JSON for an integer field.
			f, err := strconv.ParseFloat(string(b), 64)
			if err != nil || f < 0 || f != math.Trunc(f) || f >= 1<<64 {
				return 0, fmt.Errorf("not an unsigned integer: %q", b)
			}
			return uint64(f), nil
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, errRange
		}
		v = v*10 + d
	}
	return v, nil
}

func (s *scanner) uint64() uint64 {
	b := s.numText()
	if s.err != nil {
		return 0
	}
	v, err := parseUint(b)
	if err != nil {
		s.fail("%v", err)
	}
	return v
}

func (s *scanner) int64() int64 {
	b := s.numText()
	if s.err != nil {
		return 0
	}
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	v, err := parseUint(b)
	if err != nil || v > 1<<63 || (!neg && v == 1<<63) {
		s.fail("not a 64-bit integer")
		return 0
	}
	if neg {
		return -int64(v)
	}
	return int64(v)
}

func (s *scanner) float64() float64 {
	b := s.numText()
	if s.err != nil {
		return 0
	}
	switch string(b) {
	case "NaN":
		return math.NaN()
	case "Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		s.fail("not a number: %q", b)
	}
	return v
}

func (s *scanner) boolean() bool {
	s.ws()
	switch {
	case s.pos+4 <= len(s.data) && string(s.data[s.pos:s.pos+4]) == "true":
		s.pos += 4
		return true
	case s.pos+5 <= len(s.data) && string(s.data[s.pos:s.pos+5]) == "false":
		s.pos += 5
		return false
	}
	s.fail("want true or false")
	return false
}

// skip consumes any value and returns its raw text.
func (s *scanner) skip() []byte {
	start := s.peek()
	if s.err != nil {
		return nil
	}
	from := s.pos
	s.depth++
	defer func() { s.depth-- }()
	if s.depth > maxDepth {
		s.fail("nesting deeper than %d", maxDepth)
		return nil
	}
	switch {
	case start == '{':
		s.pos++
		for first := true; ; {
			if _, ok := s.key(&first); !ok {
				break
			}
			s.skip()
		}
	case start == '[':
		s.pos++
		for first := true; s.elem(&first); {
			s.skip()
		}
	case start == '"':
		s.str()
	case start == 't' || start == 'f':
		s.boolean()
	case start == 'n':
		if !s.null() {
			s.fail("invalid literal")
		}
	case start == 0:
		s.fail("unexpected end of input")
	default:
		s.number()
	}
	if s.err != nil {
		return nil
	}
	return s.data[from:s.pos]
}

// end checks that only white space follows the value.
func (s *scanner) end() {
	s.ws()
	if s.err == nil && s.pos < len(s.data) {
		s.fail("trailing data after the JSON value")
	}
}
