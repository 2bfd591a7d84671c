// Package yamlfile reads a user's YAML file strictly: one document, no
// unknown keys, and errors that name the file, the line and the key. It
// keeps the line of every key path ("pools[0].vllm.max_num_seqs") so that
// a later semantic check can point at the value it refuses.
package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// Mapping names a Go struct that a YAML mapping decodes into, for unknown
// key messages: What is how the message calls it ("a pool"), Keys the
// struct whose yaml tags are the valid keys.
type Mapping struct {
	What string
	Keys reflect.Type
}

// Doc is a decoded file's key lines.
type Doc struct {
	Source string
	lines  map[string]int
}

// Decode reads data, the contents of the file named source, into out with
// unknown keys refused; mappings, keyed by Go type name as yaml.v3 prints
// it ("deploy.poolYAML"), make unknown-key errors list the valid keys.
func Decode(data []byte, source string, out any, mappings map[string]Mapping) (*Doc, error) {
	d := &Doc{Source: source, lines: map[string]int{}}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty file", source)
		}
		return nil, fmt.Errorf("%s: %s", source, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("%s:%d: a second YAML document; the file holds one", source, extra.Line)
	}
	d.index(doc.Content[0], "")
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(out); err != nil {
		return nil, decodeError(source, err, mappings)
	}
	return d, nil
}

var (
	unknownKeyRE = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (\S+)$`)
	lineRE       = regexp.MustCompile(`^line (\d+): (.*)$`)
)

// decodeError rewrites yaml.v3's decoding errors as file:line: message,
// and lists the valid keys for an unknown one.
func decodeError(source string, err error, mappings map[string]Mapping) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return fmt.Errorf("%s: %s", source, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	msg := te.Errors[0]
	if m := unknownKeyRE.FindStringSubmatch(msg); m != nil {
		where, keys := "this mapping", ""
		if t, ok := mappings[m[3]]; ok {
			where = t.What
			var names []string
			for i := 0; i < t.Keys.NumField(); i++ {
				names = append(names, strings.Split(t.Keys.Field(i).Tag.Get("yaml"), ",")[0])
			}
			keys = "; use one of " + strings.Join(names, ", ")
		}
		return fmt.Errorf("%s:%s: unknown key %q in %s%s", source, m[1], m[2], where, keys)
	}
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s:%s: %s", source, m[1], strings.Replace(m[2], "cannot unmarshal", "cannot read", 1))
	}
	return fmt.Errorf("%s: %s", source, msg)
}

// index records the line of every key path.
func (d *Doc) index(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			d.lines[p] = n.Content[i].Line
			d.index(n.Content[i+1], p)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			d.lines[p] = c.Line
			d.index(c, p)
		}
	}
}

// Line is the line of key, or of its nearest ancestor present in the
// file (1 when none is).
func (d *Doc) Line(key string) int {
	for k := key; k != ""; {
		if l, ok := d.lines[k]; ok {
			return l
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 1
}

// Errorf is an error about key: "file:line: key: message".
func (d *Doc) Errorf(key, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s: %s", d.Source, d.Line(key), key, fmt.Sprintf(format, args...))
}
