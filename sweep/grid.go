package sweep

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/schema"
	"github.com/blis-sim/blis/internal/yamlfile"
)

// GridVersion is the grid file version this package reads.
const GridVersion = 1

// Axis is one swept key and its values, in order. Each value is the text
// experiment.Draft.Set reads for the key ("4", "least-loaded", or a YAML
// flow mapping such as "{queue-depth: 1}").
type Axis struct {
	Key    string
	Values []string
}

// Setting is a key set to one value at every point of the sweep.
type Setting struct {
	Key, Value, Origin string
}

// Grid is what a sweep varies: its axes (the first varies slowest), the
// settings every point shares, and the seeds per point (0: not given).
type Grid struct {
	Axes  []Axis
	Set   []Setting
	Seeds int
}

// Points is the number of points: the product of the axes' lengths (1
// without an axis), or an error past MaxPoints.
func (g *Grid) Points() (int, error) {
	n := 1
	for _, a := range g.Axes {
		if len(a.Values) == 0 {
			return 0, fmt.Errorf("%s: no values", a.Key)
		}
		if n > MaxPoints/len(a.Values) {
			var sizes []string
			for _, a := range g.Axes {
				sizes = append(sizes, strconv.Itoa(len(a.Values)))
			}
			return 0, fmt.Errorf("the grid has more than %d points (%s values): every point is resolved before any run; sweep fewer values at once", MaxPoints, strings.Join(sizes, " × "))
		}
		n *= len(a.Values)
	}
	return n, nil
}

// Values are point p's values, one per axis: the last axis varies
// fastest.
func (g *Grid) Values(p int) []string {
	out := make([]string, len(g.Axes))
	for i := len(g.Axes) - 1; i >= 0; i-- {
		n := len(g.Axes[i].Values)
		out[i] = g.Axes[i].Values[p%n]
		p /= n
	}
	return out
}

// Add appends an axis (or, with one value and single true, a setting),
// refusing a key the grid already has.
func (g *Grid) Add(key string, values []string, origin string, single bool) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("%s: %w", origin, err)
	}
	for _, a := range g.Axes {
		if a.Key == key {
			return fmt.Errorf("%s: %s is swept twice", origin, key)
		}
	}
	for _, s := range g.Set {
		if s.Key == key {
			return fmt.Errorf("%s: %s is set twice (%s)", origin, key, s.Origin)
		}
	}
	if len(values) == 0 {
		return fmt.Errorf("%s: %s: no values", origin, key)
	}
	if single && len(values) == 1 {
		g.Set = append(g.Set, Setting{Key: key, Value: values[0], Origin: origin})
		return nil
	}
	for i, v := range values {
		if slices.Contains(values[:i], v) {
			return fmt.Errorf("%s: %s: the value %q is given twice", origin, key, clip.String(v))
		}
	}
	g.Axes = append(g.Axes, Axis{Key: key, Values: values})
	return nil
}

// maxKey is longer than any experiment key (the longest, a policy
// parameter of a pool's autoscaler, is under 100 bytes).
const maxKey = 256

// checkKey refuses what no experiment key can be: an empty key, a key
// longer than maxKey, spaces, control characters. Whether the key exists is the experiment's to say
// (Draft.Set lists the valid keys).
func checkKey(key string) error {
	if key == "" {
		return errors.New("an empty key")
	}
	if len(key) > maxKey {
		return fmt.Errorf("%q: a key of %d bytes is not an experiment key", clip.String(key), len(key))
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("%q is not UTF-8", clip.String(key))
	}
	for _, r := range key {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '=' || r == ',' || r == '"' {
			return fmt.Errorf("%q is not an experiment key (dotted keys as the experiment file spells them: workload.rate_scale, deployment.pools[0].replicas)", clip.String(key))
		}
	}
	return nil
}

// ParseSet reads one --set argument, KEY=V1,V2,...: the values are read
// as a YAML flow sequence without its brackets, so a value holding a
// comma is quoted ('workload.synthetic.prompt_tokens="const:100","uniform:10,20"')
// and a mapping is written in braces. The text after = is returned as it
// is when it is one value, so that a single value means what it means
// to blis run's --set.
func ParseSet(arg string) (key string, values []string, err error) {
	k, v, ok := strings.Cut(arg, "=")
	if !ok {
		return "", nil, fmt.Errorf("--set %q: want KEY=VALUE, or KEY=V1,V2 to sweep the values", clip.String(arg))
	}
	key = strings.TrimSpace(k)
	if err := checkKey(key); err != nil {
		return "", nil, fmt.Errorf("--set %q: %w", clip.String(arg), err)
	}
	if !utf8.ValidString(v) {
		return "", nil, fmt.Errorf("--set %s: the value is not UTF-8", key)
	}
	values, err = ParseValues(v)
	if err != nil {
		return "", nil, fmt.Errorf("--set %s: %w", key, err)
	}
	if len(values) == 1 {
		values[0] = v
	}
	return key, values, nil
}

// ParseValues reads V1,V2,... (a YAML flow sequence without its brackets)
// into the values' texts.
func ParseValues(text string) ([]string, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("no value after =")
	}
	seq, err := schema.ParseYAML("[" + text + "\n]")
	if err != nil || seq == nil || seq.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("cannot read %q as values separated by commas (quote a value that holds a comma or a bracket)", clip.String(text))
	}
	if len(seq.Content) == 0 {
		return nil, errors.New("no value after =")
	}
	var out []string
	for i, v := range seq.Content {
		s, err := valueText(v)
		if err != nil {
			return nil, fmt.Errorf("value %d: %w", i+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// valueText is a value as Draft.Set reads it: a scalar's text, or a
// mapping or list as a one-line YAML flow collection.
func valueText(v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" && v.Style == 0 {
			return "", errors.New("an empty value")
		}
		if strings.ContainsAny(v.Value, "\n\r") {
			return "", errors.New("a value on several lines")
		}
		return v.Value, nil
	case yaml.MappingNode, yaml.SequenceNode:
		c := *v
		flow(&c)
		b, err := yaml.Marshal(&c)
		if err != nil {
			return "", err
		}
		s := strings.TrimSpace(string(b))
		if strings.ContainsAny(s, "\n\r") {
			return "", errors.New("a value on several lines")
		}
		return s, nil
	}
	return "", errors.New("an alias or anchor; write the value itself")
}

// flow makes n and everything in it a flow collection, without comments,
// so that it marshals on one line.
func flow(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = yaml.FlowStyle
		kids := make([]*yaml.Node, len(n.Content))
		for i, c := range n.Content {
			cc := *c
			flow(&cc)
			kids[i] = &cc
		}
		n.Content = kids
	}
}

// gridFile is a grid file's top level.
type gridFile struct {
	Version *int      `yaml:"version"`
	Seeds   *int      `yaml:"seeds"`
	Grid    yaml.Node `yaml:"grid"`
}

// seedsKey is the grid file's seeds key.
var seedsKey = schema.Key{Name: "seeds", Type: schema.Int, Unit: "seeds", Min: 1, Max: MaxSeeds, Doc: "seeds per point"}

// checkGrid decodes the grid file's declared values (seeds) before the
// decoder can truncate a fraction.
func checkGrid(root *yaml.Node) error {
	for i := 0; root.Kind == yaml.MappingNode && i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == seedsKey.Name {
			if _, err := seedsKey.Decode(root.Content[i+1], ""); err != nil {
				return err
			}
		}
	}
	return nil
}

var gridMappings = map[string]yamlfile.Mapping{"sweep.gridFile": {What: "the top level", Keys: reflect.TypeOf(gridFile{})}}

// ParseGrid reads a grid file (source names it in errors):
//
//	version: 1
//	seeds: 3                                   # optional: seeds per point
//	grid:                                      # in order: the first key varies slowest
//	  deployment.pools[0].replicas: [1, 2, 4]  # a list: an axis
//	  workload.rate_scale: [0.5, 1, 2]
//	  policies.routing.type: least-loaded      # one value: set at every point
//
// Keys are the experiment's dotted keys; whether they exist is checked
// when the grid is applied to an experiment.
func ParseGrid(data []byte, source string) (*Grid, error) {
	var f gridFile
	doc, err := yamlfile.DecodeChecked(data, source, &f, gridMappings, checkGrid)
	if err != nil {
		return nil, err
	}
	if f.Version == nil {
		return nil, fmt.Errorf("%s: the grid file needs version: %d at its top (docs/sweeps.md)", source, GridVersion)
	}
	if *f.Version != GridVersion {
		return nil, doc.Errorf("version", "this blis reads version %d grid files, got %d", GridVersion, *f.Version)
	}
	g := &Grid{}
	if f.Seeds != nil {
		g.Seeds = *f.Seeds // within seedsKey's range
	}
	m := &f.Grid
	switch {
	case m.Kind == 0 || (m.Kind == yaml.ScalarNode && m.Tag == "!!null"):
		return g, nil
	case m.Kind != yaml.MappingNode:
		return nil, fmt.Errorf("%s:%d: grid: a mapping of experiment keys to values, or to lists of values", source, m.Line)
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		at := fmt.Sprintf("%s:%d: grid", source, k.Line)
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%s: a key must be an experiment key, not a collection", at)
		}
		var values []string
		if v.Kind == yaml.SequenceNode {
			for j, e := range v.Content {
				s, err := valueText(e)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: value %d: %w", at, clip.String(k.Value), j+1, err)
				}
				values = append(values, s)
			}
			if len(values) == 0 {
				return nil, fmt.Errorf("%s.%s: an empty list; give at least one value", at, clip.String(k.Value))
			}
			// A list of one value is still an axis: the file says so.
			if err := g.Add(k.Value, values, at+"."+clip.String(k.Value), false); err != nil {
				return nil, err
			}
			continue
		}
		s, err := valueText(v)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", at, clip.String(k.Value), err)
		}
		if err := g.Add(k.Value, []string{s}, at+"."+clip.String(k.Value), true); err != nil {
			return nil, err
		}
	}
	if _, err := g.Points(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return g, nil
}

// Marshal writes the grid as a grid file that ParseGrid reads back to
// the same grid (the Kubernetes manifest carries it so).
func (g *Grid) Marshal() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "version: %d\n", GridVersion)
	if g.Seeds > 0 {
		fmt.Fprintf(&b, "seeds: %d\n", g.Seeds)
	}
	if len(g.Axes)+len(g.Set) == 0 {
		return []byte(b.String())
	}
	b.WriteString("grid:\n")
	for _, s := range g.Set {
		fmt.Fprintf(&b, "  %s: %s\n", quoteKey(s.Key), quoteValue(s.Value))
	}
	for _, a := range g.Axes {
		vs := make([]string, len(a.Values))
		for i, v := range a.Values {
			vs[i] = quoteValue(v)
		}
		fmt.Fprintf(&b, "  %s: [%s]\n", quoteKey(a.Key), strings.Join(vs, ", "))
	}
	return []byte(b.String())
}

func quoteKey(k string) string { return strconv.Quote(k) }

// quoteValue writes a value so that valueText reads it back: a flow
// collection as it is, a scalar double-quoted.
func quoteValue(v string) string {
	if strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[") {
		var n yaml.Node
		if yaml.Unmarshal([]byte(v), &n) == nil && len(n.Content) == 1 && n.Content[0].Kind != yaml.ScalarNode {
			if s, err := valueText(n.Content[0]); err == nil && s == v {
				return v
			}
		}
	}
	return strconv.Quote(v)
}
