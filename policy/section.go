package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/internal/clip"
)

// Raw is a section as a file or a flag gives it: a template name and its
// parameters, a YAML mapping (its zero value or an empty mapping: every
// parameter's default). Params keeps the file's lines for errors.
type Raw struct {
	Type   string    `yaml:"type"`
	Params yaml.Node `yaml:"params"`
}

// Section is a resolved section: a template and a value for each of its
// parameters, in schema order. The zero Section is not valid; start from
// Default or ParseSection.
type Section struct {
	Kind   Kind
	Type   string
	Values []Value
	// given marks the values a file or Set gave; the others follow their
	// DefaultBy when the parameter they depend on changes.
	given []bool
}

// FieldError is an invalid section: Key is relative to the section
// ("type", "params.capacity", "params.tenants.alice").
type FieldError struct {
	Key string
	Err error
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(key, format string, args ...any) error {
	return &FieldError{Key: key, Err: fmt.Errorf(format, args...)}
}

// Default is kind's default template with its defaults.
func Default(kind Kind) Section {
	ts := Templates(kind)
	if len(ts) == 0 {
		panic("policy: no templates of kind " + string(kind))
	}
	return newSection(&ts[0])
}

func newSection(t *Template) Section {
	s := Section{Kind: t.Kind, Type: t.Name, Values: make([]Value, len(t.Params)), given: make([]bool, len(t.Params))}
	for i, p := range t.Params {
		s.Values[i] = p.Default
		s.Values[i].M = append([]Entry(nil), p.Default.M...)
	}
	s.derive(t) // the defaults' own cases always exist
	return s
}

// derive sets every parameter not given that has a DefaultBy from the
// value of the parameter it depends on; one with no case for that value
// is an error.
func (s *Section) derive(t *Template) error {
	for i, p := range t.Params {
		if p.DefaultBy == nil || s.given[i] {
			continue
		}
		j, _ := t.param(p.DefaultBy.Param)
		on := s.Values[j].S
		found := false
		for _, c := range p.DefaultBy.Cases {
			if c.When == on {
				s.Values[i], found = c.V, true
			}
		}
		if !found {
			return fieldErr("params."+p.Name, "has no default with %s %s; give one", p.DefaultBy.Param, on)
		}
	}
	return nil
}

// ParseSection resolves r as a section of kind: the template must exist
// and every parameter given must be one of its own, of the right type and
// in range; parameters not given take their defaults. Errors are
// *FieldError values.
func ParseSection(kind Kind, r Raw) (Section, error) {
	t, err := Lookup(kind, r.Type)
	if err != nil {
		return Section{}, &FieldError{Key: "type", Err: err}
	}
	s := newSection(t)
	p := &r.Params
	if p.Kind == 0 || (p.Kind == yaml.ScalarNode && p.Tag == "!!null") {
		return s, nil
	}
	if p.Kind != yaml.MappingNode {
		return s, fieldErr("params", "must be a mapping of parameter: value")
	}
	for i := 0; i+1 < len(p.Content); i += 2 {
		name := p.Content[i].Value
		idx, par := t.param(name)
		if par == nil {
			if len(t.Params) == 0 {
				return s, fieldErr("params."+name, "%s policy %s takes no parameters", kind, t.Name)
			}
			return s, fieldErr("params."+name, "%s policy %s has no parameter %q; use one of %s", kind, t.Name, clip.String(name), strings.Join(t.ParamNames(), ", "))
		}
		for j := 0; j < i; j += 2 {
			if p.Content[j].Value == name {
				return s, fieldErr("params."+name, "given twice")
			}
		}
		v, err := par.decode(p.Content[i+1], "params."+name)
		if err != nil {
			return s, err
		}
		s.Values[idx], s.given[idx] = v, true
	}
	return s, s.derive(t)
}

// decode reads n as p's value; key names it in errors.
func (p *Param) decode(n *yaml.Node, key string) (Value, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return Value{}, fieldErr(key, "no value; give one, or leave the parameter out for its default (%s)", p.DefaultString())
	}
	switch p.Type {
	case Bool:
		b, err := scalarBool(n)
		if err != nil {
			return Value{}, &FieldError{Key: key, Err: err}
		}
		return Value{B: b}, nil
	case String:
		if n.Kind != yaml.ScalarNode || !contains(p.Enum, n.Value) {
			return Value{}, fieldErr(key, "want one of %s, got %s", strings.Join(p.Enum, ", "), describe(n))
		}
		return Value{S: n.Value}, nil
	case Float, Int:
		x, err := p.number(n)
		if err != nil {
			return Value{}, &FieldError{Key: key, Err: err}
		}
		if p.Type == Int {
			return Value{I: int64(x)}, nil
		}
		return Value{F: x}, nil
	}
	// A map.
	if n.Kind != yaml.MappingNode {
		return Value{}, fieldErr(key, "must be a mapping of name: %s", p.Unit)
	}
	var v Value
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		ek := key + "." + k
		if p.Keys != nil && !contains(p.Keys, k) {
			return Value{}, fieldErr(ek, "%q is not one of %s", clip.String(k), strings.Join(p.Keys, ", "))
		}
		for _, e := range v.M {
			if e.Key == k {
				return Value{}, fieldErr(ek, "given twice")
			}
		}
		x, err := p.number(n.Content[i+1])
		if err != nil {
			return Value{}, &FieldError{Key: ek, Err: err}
		}
		v.M = append(v.M, Entry{Key: k, V: x})
	}
	return v, p.checkMap(v, key)
}

// number reads a scalar as a number of p's type and checks its range.
func (p *Param) number(n *yaml.Node) (float64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("want a number, got %s", describe(n))
	}
	var x float64
	if err := n.Decode(&x); err != nil { // YAML's numbers, .inf and .nan among them
		var perr error
		if x, perr = strconv.ParseFloat(strings.TrimSpace(n.Value), 64); perr != nil {
			return 0, fmt.Errorf("want a number, got %q", clip.String(n.Value))
		}
	}
	if p.Type == Int || p.Type == IntMap {
		if x != math.Trunc(x) || math.IsInf(x, 0) {
			return 0, fmt.Errorf("want a whole number, got %s", clip.String(n.Value))
		}
	}
	return x, p.check(x)
}

// check checks x against p's range.
func (p *Param) check(x float64) error {
	ok := !math.IsNaN(x) && !math.IsInf(x, 0) &&
		(x > p.Min || (!p.MinOpen && x == p.Min)) &&
		(x < p.Max || (!p.MaxOpen && x == p.Max))
	if !ok {
		r := p.RangeString()
		if r == "finite" {
			return fmt.Errorf("must be finite, got %v", x)
		}
		if strings.HasPrefix(r, "[") || strings.HasPrefix(r, "(") {
			r = "within " + r
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			r = "finite and " + r
		}
		if p.Unit != "" {
			r += " " + p.Unit
		}
		return fmt.Errorf("must be %s, got %s", r, fmtNum(x))
	}
	return nil
}

// checkMap checks a map's values as a whole: a scorer list needs a weight
// > 0 and a finite sum, which normalization divides by; an empty one is
// accepted only where it is the default (it then means "none given").
func (p *Param) checkMap(v Value, key string) error {
	if p.Keys == nil {
		return nil
	}
	var sum float64
	for _, e := range v.M {
		sum += e.V
	}
	switch {
	case len(v.M) == 0 && len(p.Default.M) == 0:
		return nil // the default: none given
	case len(v.M) == 0:
		return fieldErr(key, "give at least one of %s", strings.Join(p.Keys, ", "))
	case !(sum > 0):
		return fieldErr(key, "the weights are all 0; at least one must be > 0")
	case math.IsInf(sum, 0):
		return fieldErr(key, "the weights sum to more than %g; use smaller numbers (only their ratios matter)", math.MaxFloat64)
	}
	return nil
}

func scalarBool(n *yaml.Node) (bool, error) {
	if n.Kind == yaml.ScalarNode {
		switch n.Value {
		case "true":
			return true, nil
		case "false":
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
	return strconv.Quote(clip.String(n.Value))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Template is s's template.
func (s Section) Template() *Template {
	t, err := Lookup(s.Kind, s.Type)
	if err != nil {
		panic("policy: " + err.Error())
	}
	return t
}

func (s Section) value(name string) Value {
	i, p := s.Template().param(name)
	if p == nil {
		panic(fmt.Sprintf("policy: %s %s has no parameter %s", s.Kind, s.Type, name))
	}
	return s.Values[i]
}

// Float, Int, Bool and Map are the value of s's parameter name, which
// must be one of its template's, of that type.
func (s Section) Float(name string) float64 { return s.value(name).F }
func (s Section) Int(name string) int64     { return s.value(name).I }
func (s Section) Bool(name string) bool     { return s.value(name).B }
func (s Section) String(name string) string { return s.value(name).S }
func (s Section) Map(name string) []Entry   { return s.value(name).M }

// Has reports whether s's template has a parameter name.
func (s Section) Has(name string) bool {
	_, p := s.Template().param(name)
	return p != nil
}

// Set sets s's parameter name from text, parsed as YAML (a number, true
// or false, or a flow mapping such as "{a: 1, b: 2}"), with the same
// checks as a file's value. Errors are *FieldError values under params.
func (s *Section) Set(name, text string) error {
	t := s.Template()
	i, p := t.param(name)
	if p == nil {
		if len(t.Params) == 0 {
			return fieldErr("params."+name, "%s policy %s takes no parameters", s.Kind, t.Name)
		}
		return fieldErr("params."+name, "%s policy %s has no parameter %q; use one of %s", s.Kind, t.Name, clip.String(name), strings.Join(t.ParamNames(), ", "))
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(text), &n); err != nil || len(n.Content) != 1 {
		return fieldErr("params."+name, "cannot read %q", clip.String(text))
	}
	v, err := p.decode(n.Content[0], "params."+name)
	if err != nil {
		return err
	}
	if s.given == nil {
		s.given = make([]bool, len(t.Params))
	}
	s.Values[i], s.given[i] = v, true
	return s.derive(t)
}

// Equal reports whether s and o are the same template with the same
// values.
func (s Section) Equal(o Section) bool {
	if s.Kind != o.Kind || s.Type != o.Type || len(s.Values) != len(o.Values) {
		return false
	}
	for i, v := range s.Values {
		w := o.Values[i]
		if v.F != w.F || v.I != w.I || v.B != w.B || v.S != w.S || len(v.M) != len(w.M) {
			return false
		}
		for j := range v.M {
			if v.M[j] != w.M[j] {
				return false
			}
		}
	}
	return true
}

// fmtNum formats a number the shortest way that reads back exactly, a
// whole number without an exponent.
func fmtNum(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1e15 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// Node is s as YAML: {type, params}, every parameter in schema order
// (what --print-config writes; ParseSection reads it back to s).
func (s Section) Node() *yaml.Node {
	t := s.Template()
	params := &yaml.Node{Kind: yaml.MappingNode, Style: 0}
	for i, p := range t.Params {
		params.Content = append(params.Content, str(p.Name), p.node(s.Values[i]))
	}
	if len(t.Params) == 0 {
		params.Style = yaml.FlowStyle
	}
	return &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{str("type"), str(s.Type), str("params"), params}}
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func (p *Param) node(v Value) *yaml.Node {
	// Plain scalars: a whole float such as 0 reads back as a number all
	// the same (ParseSection takes any number).
	scalar := func(_, s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }
	switch p.Type {
	case Bool:
		return scalar("!!bool", strconv.FormatBool(v.B))
	case Int:
		return scalar("!!int", strconv.FormatInt(v.I, 10))
	case Float:
		return scalar("!!float", fmtNum(v.F))
	case String:
		return str(v.S)
	}
	m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	for _, e := range v.M {
		m.Content = append(m.Content, str(e.Key), scalar("!!float", fmtNum(e.V)))
	}
	return m
}

// MarshalJSON writes s as {"type": ..., "params": {...}}, parameters in
// schema order and maps in their given order (the run's echo).
func (s Section) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteString(`{"type":` + strconv.Quote(s.Type) + `,"params":{`)
	for i, p := range s.Template().Params {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(p.Name) + ":")
		v := s.Values[i]
		switch p.Type {
		case Bool:
			b.WriteString(strconv.FormatBool(v.B))
		case Int:
			b.WriteString(strconv.FormatInt(v.I, 10))
		case Float:
			b.WriteString(jsonNum(v.F))
		case String:
			b.WriteString(strconv.Quote(v.S))
		default:
			b.WriteByte('{')
			for j, e := range v.M {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strconv.Quote(e.Key) + ":" + jsonNum(e.V))
			}
			b.WriteByte('}')
		}
	}
	b.WriteString("}}")
	return []byte(b.String()), nil
}

// jsonNum formats x as encoding/json does (ParseSection refuses NaN and
// ±Inf, so there is always a number to write).
func jsonNum(x float64) string {
	b, err := json.Marshal(x)
	if err != nil {
		return "null"
	}
	return string(b)
}
