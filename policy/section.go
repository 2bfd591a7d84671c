package policy

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/internal/schema"
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
type FieldError = schema.Error

func fieldErr(key, format string, args ...any) error { return schema.Errorf(key, format, args...) }

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
	_ = s.derive(t) // the defaults' own cases always exist
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
		j, _ := param(t, p.DefaultBy.Param)
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
		idx, par := param(t, name)
		if par == nil {
			return s, noParam(t, name)
		}
		for j := 0; j < i; j += 2 {
			if p.Content[j].Value == name {
				return s, fieldErr("params."+name, "given twice")
			}
		}
		v, err := par.Decode(p.Content[i+1], "params."+name)
		if err != nil {
			return s, err
		}
		s.Values[idx], s.given[idx] = v, true
	}
	if err := s.derive(t); err != nil {
		return s, err
	}
	return s, s.check(t)
}

// check runs t's rules across parameters.
func (s Section) check(t *Template) error {
	if t.Check == nil {
		return nil
	}
	return t.Check(s)
}

// noParam is the error of a parameter t does not have.
func noParam(t *Template, name string) error {
	if len(t.Params) == 0 {
		return fieldErr("params."+name, "%s policy %s takes no parameters", t.Kind, t.Name)
	}
	return fieldErr("params."+name, "%s policy %s has no parameter %q; use one of %s", t.Kind, t.Name, schema.Clip(name), strings.Join(paramNames(t), ", "))
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
	i, p := param(s.Template(), name)
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
	_, p := param(s.Template(), name)
	return p != nil
}

// Set sets s's parameter name from text, parsed as YAML (a number, true
// or false, or a flow mapping such as "{a: 1, b: 2}"), with the same
// checks as a file's value. Errors are *FieldError values under params.
func (s *Section) Set(name, text string) error {
	t := s.Template()
	i, p := param(t, name)
	if p == nil {
		return noParam(t, name)
	}
	v, err := p.Parse(text, "params."+name)
	if err != nil {
		return err
	}
	if s.given == nil {
		s.given = make([]bool, len(t.Params))
	}
	s.Values = append([]Value(nil), s.Values...)
	s.Values[i], s.given[i] = v, true
	if err := s.derive(t); err != nil {
		return err
	}
	return s.check(t)
}

// Equal reports whether s and o are the same template with the same
// values.
func (s Section) Equal(o Section) bool {
	if s.Kind != o.Kind || s.Type != o.Type || len(s.Values) != len(o.Values) {
		return false
	}
	for i, v := range s.Values {
		if !v.Equal(o.Values[i]) {
			return false
		}
	}
	return true
}

// Node is s as YAML: {type, params}, every parameter in schema order
// (what --print-config writes; ParseSection reads it back to s).
func (s Section) Node() *yaml.Node {
	t := s.Template()
	params := &yaml.Node{Kind: yaml.MappingNode, Style: 0}
	for i, p := range t.Params {
		params.Content = append(params.Content, str(p.Name), p.Node(s.Values[i]))
	}
	if len(t.Params) == 0 {
		params.Style = yaml.FlowStyle
	}
	return &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{str("type"), str(s.Type), str("params"), params}}
}

func str(s string) *yaml.Node { return schema.Str(s) }

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
