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
	"sort"
	"strconv"
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
	// Prefix, when not empty, is the key path of the decoded mapping in
	// its file (DecodeNode); Errorf writes it in front of the key.
	Prefix string
	lines  map[string]int
	root   int // the line Line falls back to (the decoded mapping's)
}

// Decode reads data, the contents of the file named source, into out with
// unknown keys refused; mappings, keyed by Go type name as yaml.v3 prints
// it ("deploy.poolYAML"), make unknown-key errors list the valid keys.
func Decode(data []byte, source string, out any, mappings map[string]Mapping) (*Doc, error) {
	return DecodeChecked(data, source, out, mappings, nil)
}

// DecodeChecked is Decode with check run on the file's tree before it is
// decoded into out: a check that knows each key's declaration refuses a
// value (a fraction in a whole number, a time below the clock's tick)
// before the decoder can truncate it. Its errors are placed in the file
// when they are keyed (a *schema.Error-like error with a Key method).
func DecodeChecked(data []byte, source string, out any, mappings map[string]Mapping, check func(root *yaml.Node) error) (*Doc, error) {
	d := &Doc{Source: source, lines: map[string]int{}}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty file", source)
		}
		return nil, oneLine(fmt.Errorf("%s: %s", source, strings.TrimPrefix(err.Error(), "yaml: ")))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("%s:%d: a second YAML document; the file holds one", source, extra.Line)
	} else if !errors.Is(err, io.EOF) {
		// Text after the document ("{version: 1}}"): yaml.v3 reads the
		// first flow collection and would drop the rest.
		return nil, oneLine(fmt.Errorf("%s: text after the document (%s)", source, strings.TrimPrefix(err.Error(), "yaml: ")))
	}
	if err := CheckAliases(doc.Content[0]); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	d.index(doc.Content[0], "")
	if check != nil {
		if err := check(doc.Content[0]); err != nil {
			var ke keyed
			if errors.As(err, &ke) {
				return nil, oneLine(d.Errorf(ke.KeyPath(), "%v", ke.Cause()))
			}
			return nil, oneLine(fmt.Errorf("%s: %w", source, err))
		}
	}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(out); err != nil {
		return nil, d.decodeError(err, mappings)
	}
	return d, nil
}

// keyed is an error about one key (schema.Error).
type keyed interface {
	KeyPath() string
	Cause() error
}

var (
	unknownKeyRE = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (\S+)$`)
	lineRE       = regexp.MustCompile(`^line (\d+): (.*)$`)
)

// decodeError rewrites yaml.v3's decoding errors as file:line: message,
// and lists the valid keys for an unknown one.
func (d *Doc) decodeError(err error, mappings map[string]Mapping) error {
	return oneLine(d.decodeError1(err, mappings))
}

var typeErrRE = regexp.MustCompile("^cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")

// want says what a Go type reads, for a value of the wrong kind.
func want(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "a mapping"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	}
	return "a mapping"
}

// keyAt is the deepest key path on line (its key or value there), or "".
func (d *Doc) keyAt(line int) string {
	best := ""
	for k, l := range d.lines {
		if l == line && (len(k) > len(best) || (len(k) == len(best) && k < best)) {
			best = k
		}
	}
	return best
}

// oneLine keeps an error on one line: yaml.v3 quotes a multi-line value
// as it is.
func oneLine(err error) error {
	if msg := err.Error(); strings.ContainsAny(msg, "\n\r") {
		return errors.New(strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(msg))
	}
	return err
}

func (d *Doc) decodeError1(err error, mappings map[string]Mapping) error {
	source := d.Source
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return fmt.Errorf("%s: %s", source, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	msg := te.Errors[0]
	if m := unknownKeyRE.FindStringSubmatch(msg); m != nil {
		where, keys := "this mapping", ""
		if t, ok := mappings[m[3]]; ok {
			where = t.What
			keys = "; use one of " + strings.Join(tagNames(t.Keys), ", ")
		}
		return fmt.Errorf("%s:%s: unknown key %q in %s%s", source, m[1], m[2], where, keys)
	}
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if t := typeErrRE.FindStringSubmatch(m[2]); t != nil {
			// "x.yaml:4: routing: want a mapping, got "least-loaded"": the
			// key at fault, not the Go type it would have filled.
			got := strconv.Quote(t[2])
			switch t[1] {
			case "map":
				got = "a mapping"
			case "seq":
				got = "a list"
			}
			key := d.keyAt(line)
			if d.Prefix != "" {
				key = join(d.Prefix, key)
			}
			if key != "" {
				return fmt.Errorf("%s:%d: %s: want %s, got %s", source, line, printable(key), want(t[3]), got)
			}
			return fmt.Errorf("%s:%d: want %s, got %s", source, line, want(t[3]), got)
		}
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
// file (the decoded mapping's first line when none is).
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
	return max(1, d.root)
}

// Errorf is an error about key: "file:line: key: message".
func (d *Doc) Errorf(key, format string, args ...any) error {
	shown := key
	if d.Prefix != "" {
		shown = d.Prefix + "." + key
	}
	return fmt.Errorf("%s:%d: %s: %s", d.Source, d.Line(key), printable(shown), fmt.Sprintf(format, args...))
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

// Has reports whether key itself is in the file.
func (d *Doc) Has(key string) bool {
	_, ok := d.lines[key]
	return ok
}

// Keys lists the key paths under prefix (prefix itself excluded; "" for
// all), sorted, for callers that translate one file's keys into another's.
func (d *Doc) Keys(prefix string) []string {
	var out []string
	for k := range d.lines {
		if prefix == "" || strings.HasPrefix(k, prefix+".") || strings.HasPrefix(k, prefix+"[") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// DecodeNode is Decode for a mapping inside a file already read: n is the
// node (its lines are the file's), source the file, and prefix the key
// path of n in the file ("workload.spec"), which errors and Errorf put in
// front of every key, while the Doc's own keys stay relative to n.
func DecodeNode(n *yaml.Node, source, prefix string, out any, mappings map[string]Mapping) (*Doc, error) {
	d := &Doc{Source: source, Prefix: prefix, lines: map[string]int{}, root: n.Line}
	if err := CheckAliases(n); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	d.index(n, "")
	if err := checkKeys(n, reflect.TypeOf(out), source, mappings); err != nil {
		return nil, err
	}
	if err := n.Decode(out); err != nil {
		return nil, d.decodeError(err, mappings)
	}
	return d, nil
}

var nodeType = reflect.TypeOf(yaml.Node{})

// checkKeys refuses a key of n that t (a struct, through pointers, slices
// and maps) has no field for, as a strict decoder does.
func checkKeys(n *yaml.Node, t reflect.Type, source string, mappings map[string]Mapping) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nodeType {
		return nil
	}
	switch {
	case n.Kind == yaml.DocumentNode:
		for _, c := range n.Content {
			if err := checkKeys(c, t, source, mappings); err != nil {
				return err
			}
		}
	case n.Kind == yaml.AliasNode:
		return checkKeys(n.Alias, t, source, mappings)
	case n.Kind == yaml.SequenceNode && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for _, c := range n.Content {
			if err := checkKeys(c, t.Elem(), source, mappings); err != nil {
				return err
			}
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		for i := 1; i < len(n.Content); i += 2 {
			if err := checkKeys(n.Content[i], t.Elem(), source, mappings); err != nil {
				return err
			}
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		for i := 0; i+1 < len(n.Content); i += 2 {
			ft, ok := fieldByTag(t, n.Content[i].Value)
			if !ok {
				name := t.String()
				where, keys := "this mapping", ""
				if m, ok := mappings[name]; ok {
					where = m.What
					keys = "; use one of " + strings.Join(tagNames(m.Keys), ", ")
				}
				return fmt.Errorf("%s:%d: unknown key %q in %s%s", source, n.Content[i].Line, n.Content[i].Value, where, keys)
			}
			if err := checkKeys(n.Content[i+1], ft, source, mappings); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldByTag is the type of t's field whose yaml key is key, looking into
// inline fields.
func fieldByTag(t reflect.Type, key string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")
		if len(tag) > 1 && tag[1] == "inline" {
			if ft, ok := fieldByTag(f.Type, key); ok {
				return ft, true
			}
			continue
		}
		if tag[0] == key {
			return f.Type, true
		}
	}
	return nil, false
}

// tagNames lists the yaml keys of struct t, inline fields' included.
func tagNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")
		if len(tag) > 1 && tag[1] == "inline" {
			names = append(names, tagNames(f.Type)...)
			continue
		}
		if tag[0] != "" && tag[0] != "-" {
			names = append(names, tag[0])
		}
	}
	return names
}

func join(prefix, key string) string {
	if key == "" {
		return prefix
	}
	return prefix + "." + key
}
