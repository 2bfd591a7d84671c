package experiment

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/policy"
)

// maxErr bounds an error message about one bad value: the key, the value
// clipped (internal/clip), and what the key takes (a list of names).
const maxErr = 1500

// hugeValues are values of 16 KiB (more than maxErr: any unclipped quote
// of one fails) of each shape a key could read: a word, a whole number, a
// fraction, a mapping and a list.
func hugeValues() []string {
	x := strings.Repeat("x", 16<<10)
	return []string{x, "1" + strings.Repeat("0", 16<<10), "0." + strings.Repeat("1", 16<<10), "{" + x + ": 1}", "[" + x + "]"}
}

// leafKeys are the experiment file's keys (a list's first element for a
// list), from its shape.
func leafKeys(t reflect.Type, prefix string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeOf(yaml.Node{}) {
		*out = append(*out, prefix)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")
			if len(tag) > 1 && tag[1] == "inline" {
				leafKeys(f.Type, prefix, out)
				continue
			}
			if tag[0] == "" || tag[0] == "-" {
				continue
			}
			leafKeys(f.Type, strings.TrimPrefix(prefix+"."+tag[0], "."), out)
		}
	case reflect.Slice:
		leafKeys(t.Elem(), prefix+"[0]", out)
	default:
		*out = append(*out, prefix)
	}
}

// bounded fails t when err's message is longer than maxErr.
func bounded(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && len(err.Error()) > maxErr {
		t.Errorf("%s: a %d-byte error: %.300s", what, len(err.Error()), err.Error())
	}
}

// Every error about an input's value quotes at most a clip of it: a 1 MiB
// value given to any key of the experiment (by --set, and in an
// experiment file), to any policy template's parameter (in a policy file,
// which policy search's candidates are), or as a template name, gives an
// error of at most maxErr bytes (a 1 MB template name gave a 1 MB error,
// fed whole to the LLM).
func TestErrorsQuoteInputsClipped(t *testing.T) {
	var keys []string
	leafKeys(reflect.TypeOf(fileYAML{}), "", &keys)
	for _, kind := range policy.Kinds {
		keys = append(keys, fmt.Sprintf("policies.%s.type", kind))
	}
	vals := hugeValues()
	for _, key := range keys {
		for i, v := range vals {
			d := NewDraft()
			err := d.Set(key, v, "--set "+key)
			if err == nil {
				_, err = d.Resolve()
			}
			bounded(t, fmt.Sprintf("--set %s=<value %d>", key, i), err)

			doc := yamlAt(key, v)
			if doc == "" {
				continue
			}
			d, err = Parse([]byte(doc), "exp.yaml")
			if err == nil {
				_, err = d.Resolve()
			}
			bounded(t, fmt.Sprintf("exp.yaml %s: <value %d>", key, i), err)
		}
	}
	path := filepath.Join(t.TempDir(), "candidate.yaml")
	for _, kind := range policy.Kinds {
		for _, tp := range policy.Templates(kind) {
			for _, p := range tp.Params {
				for i, v := range vals {
					file := fmt.Sprintf("version: 1\n%s:\n  type: %s\n  params:\n    %s: %s\n", kind, tp.Name, p.Name, v)
					if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
						t.Fatal(err)
					}
					d := NewDraft()
					err := d.LoadPolicies(path)
					if err == nil {
						_, err = d.Resolve()
					}
					bounded(t, fmt.Sprintf("candidate.yaml %s %s params.%s: <value %d>", kind, tp.Name, p.Name, i), err)
				}
			}
		}
	}
}

// yamlAt is an experiment file setting key (dotted, [0] for a list's
// first element) to the flow value v, or "" for a key it cannot place.
func yamlAt(key, v string) string {
	parts := strings.Split(key, ".")
	var b strings.Builder
	b.WriteString("version: 1\n")
	if key == "version" {
		return "version: " + v + "\n"
	}
	indent := ""
	for i, p := range parts {
		name, list := strings.CutSuffix(p, "[0]")
		b.WriteString(indent + name + ":")
		if list {
			b.WriteString("\n" + indent + "  -")
			if i == len(parts)-1 {
				b.WriteString(" " + v + "\n")
				return b.String()
			}
			// the list element's first key sits after "- "
			rest := strings.Join(parts[i+1:], ".")
			inner := yamlAt(rest, v)
			inner = strings.TrimPrefix(inner, "version: 1\n")
			lines := strings.Split(strings.TrimSuffix(inner, "\n"), "\n")
			for j, l := range lines {
				if j == 0 {
					b.WriteString(" " + l + "\n")
				} else {
					b.WriteString(indent + "    " + l + "\n")
				}
			}
			return b.String()
		}
		if i == len(parts)-1 {
			b.WriteString(" " + v + "\n")
			return b.String()
		}
		b.WriteString("\n")
		indent += "  "
	}
	return b.String()
}
