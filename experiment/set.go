package experiment

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/schema"
)

// A key path names one value of an experiment: dotted keys as the file
// spells them, an index on a list ("deployment.pools[0].vllm.max_num_seqs"),
// or [*] for every element ("deployment.pools[*].tp"). Inside a policy's
// params and an inline workload spec, keys are the mapping's own.

type seg struct {
	name  string
	index int // noIndex, allIndex, or >= 0
}

const (
	noIndex  = -1
	allIndex = -2
)

func parsePath(key string) ([]seg, error) {
	if key == "" {
		return nil, fmt.Errorf("empty key")
	}
	var out []seg
	for _, part := range strings.Split(key, ".") {
		s := seg{name: part, index: noIndex}
		if i := strings.IndexByte(part, '['); i >= 0 {
			if !strings.HasSuffix(part, "]") {
				return nil, fmt.Errorf("key %q: %q has no closing ]", clip.String(key), clip.String(part))
			}
			s.name = part[:i]
			switch idx := part[i+1 : len(part)-1]; idx {
			case "*":
				s.index = allIndex
			default:
				n, err := strconv.Atoi(idx)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("key %q: [%s] is not an index; use [0], [1], ... or [*]", clip.String(key), clip.String(idx))
				}
				s.index = n
			}
		}
		if s.name == "" {
			return nil, fmt.Errorf("key %q has an empty part", clip.String(key))
		}
		out = append(out, s)
	}
	return out, nil
}

func (s seg) String() string {
	switch s.index {
	case noIndex:
		return s.name
	case allIndex:
		return s.name + "[*]"
	}
	return fmt.Sprintf("%s[%d]", s.name, s.index)
}

var nodeType = reflect.TypeOf(yaml.Node{})

// setPath sets the value at segs under v (an addressable struct) from
// text, calling done with each concrete key it set. at is the key so far.
func setPath(v reflect.Value, segs []seg, text, at string, done func(key string)) error {
	s := segs[0]
	key := join(at, s.name)
	f, ok := fieldValue(v, s.name)
	if !ok {
		return fmt.Errorf("%s: no such key; %s takes %s", key, orTop(at), strings.Join(yamlKeys(v.Type()), ", "))
	}
	if f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct {
		switch {
		case s.index == noIndex:
			return fmt.Errorf("%s: a list; give an index, %s[0], or [*] for every element", key, key)
		case len(segs) == 1:
			return fmt.Errorf("%s: give a key of the element", s)
		case s.index == allIndex:
			if f.Len() == 0 {
				f.Set(reflect.Append(f, reflect.Zero(f.Type().Elem())))
			}
			for i := 0; i < f.Len(); i++ {
				if err := setPath(f.Index(i), segs[1:], text, fmt.Sprintf("%s[%d]", key, i), done); err != nil {
					return err
				}
			}
			return nil
		case s.index == 0 && f.Len() == 0:
			// The default deployment's one pool, which no file wrote.
			f.Set(reflect.Append(f, reflect.Zero(f.Type().Elem())))
		case f.Len() == 0:
			// "there are 0" was false: [0] sets the default's one element.
			return fmt.Errorf("%s[%d]: no file gave this list: [0] sets its one element (the default's), or give a file with more", key, s.index)
		case s.index >= f.Len():
			return fmt.Errorf("%s[%d]: there are %d (indices from 0)", key, s.index, f.Len())
		}
		return setPath(f.Index(s.index), segs[1:], text, fmt.Sprintf("%s[%d]", key, s.index), done)
	}
	if s.index != noIndex {
		return fmt.Errorf("%s: not a list", key)
	}
	if f.Type() == nodeType {
		return setNode(f.Addr().Interface().(*yaml.Node), segs[1:], text, key, done)
	}
	if f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct {
		if len(segs) == 1 {
			return fmt.Errorf("%s: a mapping; give one of its keys: %s", key, strings.Join(yamlKeys(f.Type().Elem()), ", "))
		}
		if f.IsNil() {
			f.Set(reflect.New(f.Type().Elem()))
		}
		return setPath(f.Elem(), segs[1:], text, key, done)
	}
	if len(segs) > 1 {
		return fmt.Errorf("%s: a value, not a mapping", key)
	}
	if err := setLeaf(f, text, key); err != nil {
		var ke *schema.Error
		if errors.As(err, &ke) {
			return err
		}
		return fmt.Errorf("%s: %w", key, err)
	}
	done(key)
	return nil
}

// setLeaf sets a scalar field (or a pointer to one, or a list of numbers)
// from text, decoded by key's declaration when it has one.
func setLeaf(f reflect.Value, text, key string) error {
	t := f.Type()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	nv := reflect.New(t)
	if k := declOf(key); k != nil {
		v, err := k.Parse(text, key)
		if err != nil {
			return err
		}
		switch t.Kind() {
		case reflect.String:
			nv.Elem().SetString(v.S)
		case reflect.Bool:
			nv.Elem().SetBool(v.B)
		case reflect.Int, reflect.Int32, reflect.Int64:
			nv.Elem().SetInt(v.I)
		case reflect.Float64:
			nv.Elem().SetFloat(v.F)
		case reflect.Slice:
			nv.Elem().Set(reflect.ValueOf(v.L))
		default:
			return fmt.Errorf("experiment: %s: no setter for %s", key, t)
		}
		if f.Kind() == reflect.Pointer {
			f.Set(nv)
		} else {
			f.Set(nv.Elem())
		}
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		nv.Elem().SetString(text)
	case reflect.Bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", clip.String(text))
		}
		nv.Elem().SetBool(b)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(text, 10, t.Bits())
		if err != nil {
			return fmt.Errorf("want a whole number, got %q", clip.String(text))
		}
		nv.Elem().SetInt(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return fmt.Errorf("want a number, got %q", clip.String(text))
		}
		nv.Elem().SetFloat(x)
	default:
		n, err := schema.ParseYAML(text)
		if err == nil && n != nil {
			err = n.Decode(nv.Interface())
		}
		if err != nil {
			return fmt.Errorf("cannot read %q as %s", clip.String(text), t)
		}
	}
	if f.Kind() == reflect.Pointer {
		f.Set(nv)
	} else {
		f.Set(nv.Elem())
	}
	return nil
}

// setNode sets the value at segs in a YAML mapping (a policy's params, an
// inline workload spec), read from text as YAML.
func setNode(n *yaml.Node, segs []seg, text, at string, done func(key string)) error {
	if len(segs) == 0 {
		v, err := parseNode(text)
		if err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		*n = *v
		done(at)
		return nil
	}
	s := segs[0]
	if s.index != noIndex {
		return fmt.Errorf("%s: an index inside %s is not supported; set the whole list", join(at, s.String()), at)
	}
	if n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		*n = yaml.Node{Kind: yaml.MappingNode}
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: not a mapping", at)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == s.name {
			return setNode(n.Content[i+1], segs[1:], text, join(at, s.name), done)
		}
	}
	child := &yaml.Node{Kind: yaml.MappingNode}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s.name}, child)
	return setNode(child, segs[1:], text, join(at, s.name), done)
}

// parseNode reads text as one YAML value (schema.ParseYAML: nothing may
// follow it).
func parseNode(text string) (*yaml.Node, error) {
	n, err := schema.ParseYAML(text)
	if err != nil {
		return nil, fmt.Errorf("cannot read %q as YAML", clip.String(text))
	}
	if n == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: ""}, nil
	}
	return n, nil
}

// fieldValue is v's field whose yaml key is name, looking into inline
// fields.
func fieldValue(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")
		if len(tag) > 1 && tag[1] == "inline" {
			if f, ok := fieldValue(v.Field(i), name); ok {
				return f, true
			}
			continue
		}
		if tag[0] == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func yamlKeys(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")
		if len(tag) > 1 && tag[1] == "inline" {
			out = append(out, yamlKeys(t.Field(i).Type)...)
			continue
		}
		out = append(out, tag[0])
	}
	return out
}

func join(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

func orTop(at string) string {
	if at == "" {
		return "the top level"
	}
	return at
}
