// Package schema declares the keys of the files a user hands blis once,
// each with its name, type, unit, default (and where the default comes
// from), range and meaning, and decodes them with one decoder: the
// experiment file's keys (package experiment, deploy), the policy
// templates' parameters (registered beside the policies' code) and the
// flags that set them all read their facts from a Key.
//
// A Key's rules hold for every key that has them, so a class of mistake
// is refused everywhere at once:
//   - a whole-number key (Int, IntMap) refuses a fraction ("2.5") instead
//     of truncating it;
//   - a number must be finite and within [Min, Max] (MinOpen, MaxOpen
//     exclude a bound);
//   - a time in seconds or milliseconds (Unit "s" or "ms") that is
//     positive but rounds to 0 µs, the simulator's clock tick, is refused:
//     0 means "none" or "forever" for most times, which a tiny positive
//     value must not silently become;
//   - an empty value (YAML null) is refused: leave the key out for its
//     default;
//   - a string key with Enum takes one of its values.
//
// Errors are *Error values: the key path at fault and what is wrong. The
// caller that knows where the value came from (a file and line, a flag)
// places them (Error.Place).
package schema

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/yamlfile"
)

// Type is a key's type.
type Type string

// Key types. A map's keys are named by Key.Keys, or are tenant ids; its
// values are numbers. A list is Len numbers.
const (
	Float    Type = "float"
	Int      Type = "int"
	Bool     Type = "bool"
	String   Type = "string"
	FloatMap Type = "map[string]float"
	IntMap   Type = "map[string]int"
	List     Type = "list"
)

// Key is one key: a parameter of a policy template or a key of an
// experiment file.
type Key struct {
	// Name is the key relative to where it is declared ("capacity",
	// "nodes.idle_s").
	Name string
	Type Type
	// Unit of the value (of a map's or list's values); "" when
	// dimensionless. "s" and "ms" make the key a time (the 1 µs rule).
	Unit string
	Doc  string
	// Default is the value when the key is not given. DefaultText, when
	// set, is how docs show a default that is not a constant ("by
	// hardware", "required").
	Default     Value
	DefaultText string
	// Source says where the default comes from (a project's default, a
	// datasheet, a measurement), for the docs.
	Source string
	// Min and Max bound a number (a map's or list's values); MinOpen and
	// MaxOpen exclude the bound itself. Every number must also be finite.
	Min, Max         float64
	MinOpen, MaxOpen bool
	// Keys, when set, are the only keys a map may have; otherwise a
	// map is keyed by the workload's tenant ids.
	Keys []string
	// Enum lists a string's values ("" Enum: any string).
	Enum []string
	// Len is a list's length.
	Len int
	// DefaultBy, when set, makes the default depend on another
	// parameter's value (a string's): the parameter takes the case's
	// value when not given, and must be given when no case matches.
	DefaultBy *DefaultBy
}

// DefaultBy is a default that depends on parameter Param.
type DefaultBy struct {
	Param string
	Cases []Case
}

// Case is DefaultBy's value V when the other parameter is When.
type Case struct {
	When string
	V    Value
}

// Value is a key's value; the field its type uses is set.
type Value struct {
	F float64   // Float
	I int64     // Int
	B bool      // Bool
	S string    // String
	M []Entry   // FloatMap, IntMap: in the order given
	L []float64 // List
}

// Entry is one key of a map value.
type Entry struct {
	Key string
	V   float64 // an IntMap's values are whole numbers
}

// F, I, B and S are values of the types they name.
func F(v float64) Value { return Value{F: v} }
func I(v int64) Value   { return Value{I: v} }
func B(v bool) Value    { return Value{B: v} }
func S(v string) Value  { return Value{S: v} }

// L is a list value.
func L(v ...float64) Value { return Value{L: v} }

// Unbounded is Max for a number with no upper bound (but finiteness).
var Unbounded = math.Inf(1)

// Error is an invalid input value: Key is the key path at fault
// (relative to what reported it until placed), Also other keys at fault
// with it, Err what is wrong. Msg, when set, is the whole message (a
// placed error: "x.yaml:4: deployment.pools[0].replicas: ...").
type Error struct {
	Key  string
	Also []string
	Err  error
	Msg  string
	// Range marks a well-formed value its key refuses (out of range, a
	// time below the clock's tick, a rule across keys), as opposed to a
	// value of the wrong type: a sweep runs the other points.
	Range bool
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return strings.Join(append([]string{printable(e.Key)}, e.Also...), ", ") + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// outOfRange is a value its key's range refuses.
func outOfRange(format string, args ...any) error {
	return &rangeError{fmt.Errorf(format, args...)}
}

type rangeError struct{ error }

func (e *rangeError) Unwrap() error { return e.error }

// keyed is err about key, marked Range when it is a range error.
func keyed(key string, err error) *Error {
	var re *rangeError
	return &Error{Key: key, Err: err, Range: errors.As(err, &re)}
}

// KeyPath and Cause are the key and what is wrong with it.
func (e *Error) KeyPath() string { return e.Key }
func (e *Error) Cause() error    { return e.Err }

// Keys lists the keys at fault, the first the one to fix.
func (e *Error) Keys() []string { return append([]string{e.Key}, e.Also...) }

// Errorf is an *Error about key.
func Errorf(key, format string, args ...any) error {
	return &Error{Key: key, Err: fmt.Errorf(format, args...)}
}

// Under puts err below prefix: a *Error's keys become prefix.key (prefix
// alone for an empty key); any other error is about prefix itself.
func Under(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) || e.Msg != "" {
		return &Error{Key: prefix, Err: err}
	}
	out := &Error{Key: join(prefix, e.Key), Err: e.Err}
	for _, a := range e.Also {
		out.Also = append(out.Also, join(prefix, a))
	}
	return out
}

func join(prefix, key string) string {
	switch {
	case prefix == "":
		return key
	case key == "":
		return prefix
	}
	return prefix + "." + key
}

// printable is key as an error shows it: quoted, with escapes, when it
// holds a character that is not printable (a newline in a key would break
// the error's one line).
func printable(key string) string {
	for _, r := range key {
		if !strconv.IsPrint(r) {
			return strconv.Quote(key)
		}
	}
	return key
}

// IsTime reports whether k is a time (Unit s or ms), which the clock
// counts in whole µs.
func (k *Key) IsTime() bool { return k.Unit == "s" || k.Unit == "ms" }

// usPer is µs per unit of a time key.
func (k *Key) usPer() float64 {
	if k.Unit == "ms" {
		return 1e3
	}
	return 1e6
}

// Decode reads n as k's value; key names it in errors (k.Name when "").
func (k *Key) Decode(n *yaml.Node, key string) (Value, error) {
	if key == "" {
		key = k.Name
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return Value{}, Errorf(key, "no value; give one, or leave the key out for its default (%s)", k.DefaultString())
	}
	switch k.Type {
	case Bool:
		b, err := scalarBool(n)
		if err != nil {
			return Value{}, &Error{Key: key, Err: err}
		}
		return Value{B: b}, nil
	case String:
		if k.Enum != nil && (n.Kind != yaml.ScalarNode || !slices.Contains(k.Enum, n.Value)) {
			return Value{}, Errorf(key, "want one of %s, got %s", strings.Join(k.Enum, ", "), describe(n))
		}
		if n.Kind != yaml.ScalarNode {
			return Value{}, Errorf(key, "want a string, got %s", describe(n))
		}
		return Value{S: n.Value}, nil
	case Float, Int:
		x, i, err := k.number(n)
		if err != nil {
			return Value{}, keyed(key, err)
		}
		if k.Type == Int {
			return Value{I: i}, nil
		}
		return Value{F: x}, nil
	case List:
		if n.Kind != yaml.SequenceNode {
			return Value{}, Errorf(key, "want a list of %d numbers, got %s", k.Len, describe(n))
		}
		if len(n.Content) != k.Len {
			return Value{}, Errorf(key, "want a list of %d numbers, got %d", k.Len, len(n.Content))
		}
		v := Value{L: make([]float64, k.Len)}
		for i, c := range n.Content {
			x, _, err := k.number(c)
			if err != nil {
				return Value{}, keyed(fmt.Sprintf("%s[%d]", key, i), err)
			}
			v.L[i] = x
		}
		return v, nil
	}
	// A map.
	if n.Kind != yaml.MappingNode {
		return Value{}, Errorf(key, "must be a mapping of name: %s", k.Unit)
	}
	var v Value
	for i := 0; i+1 < len(n.Content); i += 2 {
		name := n.Content[i].Value
		ek := key + "." + name
		if k.Keys != nil && !slices.Contains(k.Keys, name) {
			return Value{}, Errorf(ek, "%s is not one of %s", strconv.Quote(Clip(name)), strings.Join(k.Keys, ", "))
		}
		for _, e := range v.M {
			if e.Key == name {
				return Value{}, Errorf(ek, "given twice")
			}
		}
		x, _, err := k.number(n.Content[i+1])
		if err != nil {
			return Value{}, keyed(ek, err)
		}
		v.M = append(v.M, Entry{Key: name, V: x})
	}
	return v, k.checkMap(v, key)
}

// ParseYAML reads text, a value a flag or --set gives, as one YAML value:
// nil for an empty text (no value), an error for text that is not YAML or
// holds more than one value. yaml.Unmarshal alone reads the first flow
// collection and drops what follows it ("{a: 1}}", "[1]]", "{a: 1} x"),
// so a mistyped value would run as part of itself.
func ParseYAML(text string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(text))
	var doc, extra yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one value")
	}
	if len(doc.Content) != 1 {
		return nil, nil
	}
	if err := yamlfile.CheckAliases(doc.Content[0]); err != nil {
		return nil, err
	}
	return doc.Content[0], nil
}

// Parse reads text as k's value, as a flag or --set gives it (YAML: a
// number, true or false, a string, or a flow mapping or list).
func (k *Key) Parse(text, key string) (Value, error) {
	if k.Type == String {
		// A string is the text as given, whatever YAML makes of it:
		// --prompt-tokens const: read as a mapping ("want a string, got
		// a mapping"), --trace-route @x did not parse at all.
		return k.Decode(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: text}, key)
	}
	n, err := ParseYAML(text)
	if err != nil || n == nil {
		if k.Type == String && err == nil {
			return k.Decode(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: text}, key)
		}
		return Value{}, Errorf(key, "cannot read %s", strconv.Quote(Clip(text)))
	}
	if k.Type == String && n.Kind == yaml.ScalarNode {
		// A string is the text as given, whatever YAML makes of it.
		n = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: text}
	}
	return k.Decode(n, key)
}

// number reads a scalar as a number of k's type and checks its range; a
// whole number is also returned exactly (a float64 holds only 53 bits).
// An entry of a map or list without a value ("{queue-depth: }", "[1, ~]")
// is refused, not read as 0.
func (k *Key) number(n *yaml.Node) (float64, int64, error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return 0, 0, errors.New("no value")
	}
	if n.Kind != yaml.ScalarNode {
		return 0, 0, fmt.Errorf("want a number, got %s", describe(n))
	}
	text := strings.TrimSpace(n.Value)
	whole := k.Type == Int || k.Type == IntMap
	if whole {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return float64(i), i, k.check(float64(i), text)
		}
	}
	var x float64
	if err := n.Decode(&x); err != nil { // YAML's numbers, .inf and .nan among them
		var perr error
		if x, perr = strconv.ParseFloat(text, 64); perr != nil {
			want := "a number"
			if whole {
				want = "a whole number"
			}
			return 0, 0, fmt.Errorf("want %s, got %s", want, strconv.Quote(Clip(n.Value)))
		}
	}
	if !whole {
		return x, 0, k.check(x, Clip(text))
	}
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return 0, 0, fmt.Errorf("want a finite whole number, got %s", Clip(n.Value))
	case x != math.Trunc(x):
		return 0, 0, fmt.Errorf("want a whole number, got %s (fractions are not rounded)", Clip(n.Value))
	case !(x >= math.MinInt64 && x < math.MaxInt64):
		// A key whose own range is narrower says it; one that takes any
		// whole number says ±2^63, not ±9.223372036854776e+18.
		if k.Min > math.MinInt64 || k.Max < math.MaxInt64 {
			if err := k.check(x, Clip(text)); err != nil {
				return 0, 0, err
			}
		}
		return 0, 0, outOfRange("must be a whole number within ±2^63, got %s", Clip(text))
	}
	return x, int64(x), k.check(x, Clip(text))
}

// Check checks x against k's range and, for a time, the clock's tick.
func (k *Key) Check(x float64) error { return k.check(x, FmtNum(x)) }

// check is Check with x shown as the input wrote it.
func (k *Key) check(x float64, shown string) error {
	ok := !math.IsNaN(x) && !math.IsInf(x, 0) &&
		(x > k.Min || (!k.MinOpen && x == k.Min)) &&
		(x < k.Max || (!k.MaxOpen && x == k.Max))
	if !ok {
		r := k.RangeString()
		if r == "finite" {
			return outOfRange("must be finite, got %s", shown)
		}
		if strings.HasPrefix(r, "[") || strings.HasPrefix(r, "(") {
			r = "within " + r
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			r = "finite and " + r
		}
		if k.Unit != "" {
			r += " " + k.Unit
		}
		return outOfRange("must be %s, got %s", r, shown)
	}
	if k.IsTime() && x > 0 && math.Round(x*k.usPer()) < 1 {
		return outOfRange("%s %s is below 1 µs, the clock's tick, and would round to 0; give 0 or at least %s %s", shown, k.Unit, FmtNum(1/k.usPer()), k.Unit)
	}
	return nil
}

// checkMap checks a map's values as a whole: a map keyed by names (a
// scorer list) needs a weight > 0 and a finite sum, which normalization
// divides by; an empty one is accepted only where it is the default (it
// then means "none given").
func (k *Key) checkMap(v Value, key string) error {
	if k.Keys == nil {
		return nil
	}
	var sum float64
	for _, e := range v.M {
		sum += e.V
	}
	switch {
	case len(v.M) == 0 && len(k.Default.M) == 0:
		return nil // the default: none given
	case len(v.M) == 0:
		return Errorf(key, "give at least one of %s", strings.Join(k.Keys, ", "))
	case !(sum > 0):
		return Errorf(key, "the weights are all 0; at least one must be > 0")
	case math.IsInf(sum, 0):
		return Errorf(key, "the weights sum to more than %g; use smaller numbers (only their ratios matter)", math.MaxFloat64)
	}
	return nil
}

func scalarBool(n *yaml.Node) (bool, error) {
	if n.Kind == yaml.ScalarNode {
		switch n.Value {
		case "true", "True", "TRUE":
			return true, nil
		case "false", "False", "FALSE":
			return false, nil
		}
	}
	return false, fmt.Errorf("want true or false, got %s", describe(n))
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(Clip(n.Value))
}

// Clip shortens s for an error message (internal/clip): a value quoted
// whole could be megabytes.
func Clip(s string) string { return clip.String(s) }

// RangeString describes k's range, as errors and the docs print it.
func (k *Key) RangeString() string {
	switch {
	case k.Type == String && k.Enum != nil:
		return "one of " + strings.Join(k.Enum, ", ")
	case k.Type == String:
		return ""
	case k.Type == Bool || (k.Keys != nil && math.IsInf(k.Max, 1) && k.Min == 0 && !k.MinOpen):
		if k.Keys != nil {
			return ">= 0"
		}
		return ""
	}
	lo, hi := "[", "]"
	if k.MinOpen {
		lo = "("
	}
	if k.MaxOpen {
		hi = ")"
	}
	switch {
	case math.IsInf(k.Min, -1) && math.IsInf(k.Max, 1):
		return "finite"
	case math.IsInf(k.Max, 1):
		if k.MinOpen {
			return "> " + FmtNum(k.Min)
		}
		return ">= " + FmtNum(k.Min)
	}
	return lo + FmtNum(k.Min) + ", " + FmtNum(k.Max) + hi
}

// DefaultString is k's default as the docs print it.
func (k *Key) DefaultString() string {
	if k.DefaultText != "" {
		return k.DefaultText
	}
	if d := k.DefaultBy; d != nil {
		parts := make([]string, len(d.Cases))
		for i, c := range d.Cases {
			parts[i] = c.When + ": " + k.ValueString(c.V)
		}
		return "by " + d.Param + " (" + strings.Join(parts, ", ") + "; else required)"
	}
	return k.ValueString(k.Default)
}

// ValueString formats v, a value of k's type.
func (k *Key) ValueString(v Value) string {
	switch k.Type {
	case Bool:
		return fmt.Sprint(v.B)
	case Int:
		return fmt.Sprint(v.I)
	case Float:
		return FmtNum(v.F)
	case String:
		return v.S
	case List:
		parts := make([]string, len(v.L))
		for i, x := range v.L {
			parts[i] = FmtNum(x)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	if len(v.M) == 0 {
		return "{}"
	}
	parts := make([]string, len(v.M))
	for i, e := range v.M {
		parts[i] = e.Key + ": " + FmtNum(e.V)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// FmtNum formats a number the shortest way that reads back exactly, a
// whole number without an exponent.
func FmtNum(x float64) string {
	if (x == math.Trunc(x) || math.Abs(x) >= 1) && math.Abs(x) < 1e15 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// Node is v, a value of k's type, as YAML (plain scalars: a whole float
// such as 0 reads back as a number all the same).
func (k *Key) Node(v Value) *yaml.Node {
	scalar := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }
	switch k.Type {
	case Bool:
		return scalar(strconv.FormatBool(v.B))
	case Int:
		return scalar(strconv.FormatInt(v.I, 10))
	case Float:
		return scalar(FmtNum(v.F))
	case String:
		return Str(v.S)
	case List:
		l := &yaml.Node{Kind: yaml.SequenceNode}
		for _, x := range v.L {
			l.Content = append(l.Content, scalar(FmtNum(x)))
		}
		return l
	}
	m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	for _, e := range v.M {
		m.Content = append(m.Content, Str(e.Key), scalar(FmtNum(e.V)))
	}
	return m
}

// Str is a string scalar.
func Str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// Equal reports whether v and w are the same value.
func (v Value) Equal(w Value) bool {
	return v.F == w.F && v.I == w.I && v.B == w.B && v.S == w.S && slices.Equal(v.M, w.M) && slices.Equal(v.L, w.L)
}
