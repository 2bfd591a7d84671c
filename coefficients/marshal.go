package coefficients

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

const header = "blis physics-model coefficients. The dot products are seconds."

// Marshal writes f as YAML in the layout of the package documentation. The
// output depends only on f, and Parse reads every value back exactly. A File
// that fails Validate is refused, so that Marshal never writes a file that
// Parse would reject.
func (f *File) Marshal() ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, HeadComment: header, Content: []*yaml.Node{node(f.layout())}}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("coefficients: encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("coefficients: encoding YAML: %w", err)
	}
	return b.Bytes(), nil
}

// node builds the YAML tree of a mapping.
func node(m mapping) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, f := range m.fields {
		if f.optional && isZero(f.val) {
			continue
		}
		k := scalar("!!str", f.key)
		k.LineComment = f.comment
		n.Content = append(n.Content, k, valueNode(f))
	}
	return n
}

// isZero reports whether the value val points at is zero or an empty list.
func isZero(val any) bool {
	v := reflect.ValueOf(val).Elem()
	if v.Kind() == reflect.Slice {
		return v.Len() == 0
	}
	return v.IsZero()
}

func valueNode(f field) *yaml.Node {
	switch v := f.val.(type) {
	case mapping:
		return node(v)
	case lazy:
		return node(v())
	case **Fit:
		return node((*v).layout())
	case **Holdout:
		return node((*v).layout())
	case *[]Input:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range *v {
			n.Content = append(n.Content, node((*v)[i].layout()))
		}
		return n
	case *[]FittedConfig:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range *v {
			n.Content = append(n.Content, node((*v)[i].layout()))
		}
		return n
	case *[]float64:
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, x := range *v {
			n.Content = append(n.Content, scalar("!!float", formatFloat(x)))
		}
		return n
	case *float64:
		return scalar("!!float", formatFloat(*v))
	case *int64:
		return scalar("!!int", strconv.FormatInt(*v, 10))
	case *int:
		return scalar("!!int", strconv.Itoa(*v))
	case *bool:
		return scalar("!!bool", strconv.FormatBool(*v))
	case *string:
		n := scalar("!!str", *v)
		// A line break is quoted rather than written as a block scalar, whose
		// chomping rules make trailing newlines fragile; and yaml.v3 would
		// write "<<" plain, which reads back as a merge key.
		if f.quoted || strings.ContainsAny(*v, "\n\r") || *v == "<<" {
			n.Style = yaml.DoubleQuotedStyle
		}
		return n
	}
	panic(fmt.Sprintf("coefficients: no writer for %T at %s", f.val, f.key))
}

func scalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

// formatFloat writes the shortest decimal that reads back as v, with a
// decimal point in the mantissa: YAML 1.1 readers (PyYAML) take 1e-300 for a
// string, and every YAML reader takes -0 for the integer 0.
func formatFloat(v float64) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if strings.ContainsAny(s, ".nN") { // has a point, or is NaN or ±Inf
		return s
	}
	if i := strings.IndexByte(s, 'e'); i >= 0 {
		return s[:i] + ".0" + s[i:]
	}
	return s + ".0"
}
