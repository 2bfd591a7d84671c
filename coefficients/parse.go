package coefficients

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/internal/yamlfile"
)

// Parse reads a coefficient file strictly and validates it (see the package
// documentation). source names the file in errors. Empty lists come back as
// nil slices.
func Parse(data []byte, source string) (*File, error) {
	if source == "" {
		source = defaultSource
	}
	p := &parser{source: source, lines: map[string]int{}}
	root, err := p.document(data)
	if err != nil {
		return nil, err
	}
	f := &File{}
	// schema_version first: a newer file may well have keys this tool does
	// not know, and "newer tool" is then the useful message.
	if v := lookup(root, "schema_version"); v != nil {
		if err := p.value(v, "schema_version", &f.SchemaVersion); err != nil {
			return nil, err
		}
		if f.SchemaVersion > SchemaVersion {
			return nil, p.fail(v, "schema_version", "written by a newer tool (schema_version %d, this tool reads %d)", f.SchemaVersion, SchemaVersion)
		}
	}
	if err := p.mapping(root, "", f.layout()); err != nil {
		return nil, err
	}
	if err := f.validate(source, p.lines); err != nil {
		return nil, err
	}
	return f, nil
}

// parser walks yaml.Nodes rather than decoding into structs: that is what
// gives key paths, line numbers, duplicate keys and key order.
type parser struct {
	source string
	lines  map[string]int // key path -> line, for validate's errors
}

func (p *parser) fail(n *yaml.Node, path, format string, args ...any) error {
	if path == "" {
		path = "(top level)"
	}
	return &keyError{source: p.source, line: n.Line, path: path, msg: fmt.Sprintf(format, args...)}
}

// document returns the top-level mapping of the single YAML document in data.
func (p *parser) document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty file", p.source)
		}
		return nil, syntaxError(p.source, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, p.fail(&next, "(top level)", "a second YAML document; a coefficient file holds one")
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(p.source, err)
	}
	root := doc.Content[0]
	if err := yamlfile.CheckAliases(root); err != nil {
		return nil, fmt.Errorf("%s: %w", p.source, err)
	}
	if root.Kind != yaml.MappingNode {
		return nil, p.fail(root, "", "expected a mapping, got %s", describe(root))
	}
	return root, nil
}

// syntaxError puts source in front of a yaml.v3 error ("yaml: line 3: ...").
func syntaxError(source string, err error) error {
	return fmt.Errorf("%s: %s", source, strings.TrimPrefix(err.Error(), "yaml: "))
}

// lookup returns the value of key in mapping n, or nil.
func lookup(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapping reads n into the fields of m.
func (p *parser) mapping(n *yaml.Node, path string, m mapping) error {
	if n.Kind != yaml.MappingNode {
		return p.fail(n, path, "expected a mapping, got %s", describe(n))
	}
	seen := make(map[string]int, len(m.fields)) // key -> line
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return p.fail(k, path, "expected a string key, got %s", describe(k))
		}
		kp := join(path, k.Value)
		if line, dup := seen[k.Value]; dup {
			return p.fail(k, kp, "duplicate key (first at line %d)", line)
		}
		seen[k.Value] = k.Line
		j := slices.IndexFunc(m.fields, func(f field) bool { return f.key == k.Value })
		if j < 0 {
			return p.fail(k, kp, "unknown key; expected one of %s", keys(m))
		}
		p.lines[kp] = k.Line
		if err := p.value(v, kp, m.fields[j].val); err != nil {
			return err
		}
	}
	for _, f := range m.fields {
		if _, ok := seen[f.key]; !ok && !f.optional {
			if path == "" {
				return &keyError{source: p.source, path: f.key, msg: "missing"}
			}
			return &keyError{source: p.source, path: join(path, f.key), msg: fmt.Sprintf("missing (%s starts at line %d)", path, n.Line)}
		}
	}
	if m.ordered {
		// Every key is present exactly once, so the i-th key must be the
		// i-th field.
		for i, f := range m.fields {
			if k := n.Content[2*i]; k.Value != f.key {
				return p.fail(k, join(path, k.Value), "out of order: expected %s here (%s keys follow the feature vector order)", f.key, path)
			}
		}
	}
	return nil
}

func keys(m mapping) string {
	ks := make([]string, len(m.fields))
	for i, f := range m.fields {
		ks[i] = f.key
	}
	return strings.Join(ks, ", ")
}

// value reads n into the value val points at (see field).
func (p *parser) value(n *yaml.Node, path string, val any) error {
	switch dst := val.(type) {
	case mapping:
		return p.mapping(n, path, dst)
	case lazy:
		return p.mapping(n, path, dst())
	case **Fit:
		fit := &Fit{}
		if err := p.mapping(n, path, fit.layout()); err != nil {
			return err
		}
		*dst = fit
	case **Holdout:
		h := &Holdout{}
		if err := p.mapping(n, path, h.layout()); err != nil {
			return err
		}
		*dst = h
	case *[]Input:
		return p.sequence(n, path, func(n *yaml.Node, path string) error {
			var in Input
			if err := p.mapping(n, path, in.layout()); err != nil {
				return err
			}
			*dst = append(*dst, in)
			return nil
		})
	case *[]FittedConfig:
		return p.sequence(n, path, func(n *yaml.Node, path string) error {
			var fc FittedConfig
			if err := p.mapping(n, path, fc.layout()); err != nil {
				return err
			}
			*dst = append(*dst, fc)
			return nil
		})
	case *[]float64:
		return p.sequence(n, path, func(n *yaml.Node, path string) error {
			var v float64
			if err := p.float(n, path, &v); err != nil {
				return err
			}
			*dst = append(*dst, v)
			return nil
		})
	case *float64:
		return p.float(n, path, dst)
	case *int64:
		return p.int(n, path, dst)
	case *int:
		var v int64
		if err := p.int(n, path, &v); err != nil {
			return err
		}
		if int64(int(v)) != v {
			return p.fail(n, path, "%d is out of range", v)
		}
		*dst = int(v)
	case *bool:
		if err := p.scalar(n, path, "true or false", "!!bool"); err != nil {
			return err
		}
		return p.decode(n, path, dst)
	case *string:
		if err := p.scalar(n, path, "a string", "!!str"); err != nil {
			return err
		}
		*dst = n.Value
	default:
		panic(fmt.Sprintf("coefficients: no parser for %T at %s", val, path))
	}
	return nil
}

// sequence calls item for each element of the sequence n with its path.
func (p *parser) sequence(n *yaml.Node, path string, item func(*yaml.Node, string) error) error {
	if n.Kind != yaml.SequenceNode {
		return p.fail(n, path, "expected a list, got %s", describe(n))
	}
	for i, e := range n.Content {
		ep := fmt.Sprintf("%s[%d]", path, i)
		p.lines[ep] = e.Line
		if err := item(e, ep); err != nil {
			return err
		}
	}
	return nil
}

// scalar checks that n is a scalar YAML resolves to one of tags, so that, for
// example, yes or a quoted "1" is not taken for a boolean or a number.
func (p *parser) scalar(n *yaml.Node, path, want string, tags ...string) error {
	if n.Kind == yaml.ScalarNode && slices.Contains(tags, n.ShortTag()) {
		return nil
	}
	return p.fail(n, path, "expected %s, got %s", want, describe(n))
}

func (p *parser) decode(n *yaml.Node, path string, dst any) error {
	if err := n.Decode(dst); err != nil {
		return p.fail(n, path, "%s: %v", describe(n), err)
	}
	return nil
}

func (p *parser) float(n *yaml.Node, path string, dst *float64) error {
	if err := p.scalar(n, path, "a number", "!!float", "!!int"); err != nil {
		return err
	}
	if err := p.decode(n, path, dst); err != nil {
		return err
	}
	// "-0" resolves to the integer 0; keep its sign.
	if *dst == 0 && strings.HasPrefix(n.Value, "-") {
		*dst = math.Copysign(0, -1)
	}
	return nil
}

func (p *parser) int(n *yaml.Node, path string, dst *int64) error {
	// Only !!int: yaml.v3 would truncate a float into an integer.
	if err := p.scalar(n, path, "an integer", "!!int"); err != nil {
		return err
	}
	return p.decode(n, path, dst)
}

// describe says what n is, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias (*" + n.Value + "); aliases are not supported"
	case yaml.ScalarNode:
		switch tag := n.ShortTag(); tag {
		case "!!null":
			return "null"
		case "!!str":
			return fmt.Sprintf("the string %.40q", n.Value)
		case "!!int", "!!float":
			return "the number " + truncate(n.Value)
		case "!!bool":
			return "the boolean " + n.Value
		default:
			return fmt.Sprintf("%s %.40q", tag, n.Value)
		}
	}
	return "nothing"
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
