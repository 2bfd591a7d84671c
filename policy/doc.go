package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// SchemaEntry is one template as the frozen schema records it
// (testdata/schema.golden.json): what may only grow.
type SchemaEntry struct {
	Kind         Kind          `json:"kind"`
	Name         string        `json:"name"`
	Pathological bool          `json:"pathological,omitempty"`
	Params       []SchemaParam `json:"params"`
}

// SchemaParam is one parameter as the frozen schema records it.
type SchemaParam struct {
	Name    string    `json:"name"`
	Type    ParamType `json:"type"`
	Unit    string    `json:"unit,omitempty"`
	Default string    `json:"default"`
	Range   string    `json:"range,omitempty"`
	Keys    []string  `json:"keys,omitempty"`
}

// Schema lists every template in documentation order.
func Schema() []SchemaEntry {
	var out []SchemaEntry
	for _, k := range Kinds {
		for _, t := range Templates(k) {
			e := SchemaEntry{Kind: t.Kind, Name: t.Name, Pathological: t.Pathological, Params: []SchemaParam{}}
			for _, p := range t.Params {
				e.Params = append(e.Params, SchemaParam{Name: p.Name, Type: p.Type, Unit: p.Unit, Default: p.DefaultString(), Range: p.RangeString(), Keys: p.Keys})
			}
			out = append(out, e)
		}
	}
	return out
}

// SchemaJSON is Schema as the golden file holds it.
func SchemaJSON() []byte {
	b, err := json.MarshalIndent(Schema(), "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// Markdown is docs/policies.md: every template with its parameters,
// generated from the schema (go test ./policy -run Doc -update).
func Markdown() []byte {
	var b bytes.Buffer
	b.WriteString(`<!-- Generated from package policy by: go test ./policy -run TestPoliciesDoc -update. Do not edit by hand. -->
# Policy templates

An experiment's ` + "`policies`" + ` section (docs/experiment.md), or a policy file given to
` + "`blis run --policy-config FILE`" + `, has six sections, each a template and its parameters:

` + "```yaml" + `
admission: {type: token-bucket, params: {capacity: 200000, refill_rate: 100000}}
priority:  {type: slo-based}
routing:   {type: weighted, params: {scorers: {prefix-affinity: 3, queue-depth: 2}}}
scheduler: {type: priority-fcfs}
autoscale: {type: none}
disaggregation: {type: never}
` + "```" + `

A section left out takes its default (the first template of each table below); a
parameter left out takes its default. An unknown template or parameter, a value of the
wrong type or out of range is an error naming the file, line and key, and listing what
is valid. Templates marked *pathological* behave badly on purpose, to test anomaly
detection. The schema only grows: a template or parameter, once here, is never renamed
or removed (` + "`policy/testdata/schema.golden.json`" + ` freezes it).

Admission and routing decide in the router at each request's arrival (in a cluster
only); the priority policy scores each request, and the scheduler orders each
instance's waiting queue by that score (priority-fcfs and reverse-priority; fcfs and sjf
ignore it); autoscale acts on the fleet.
`)
	for _, k := range Kinds {
		fmt.Fprintf(&b, "\n## %s\n", k)
		for i, t := range Templates(k) {
			tag := ""
			switch {
			case i == 0:
				tag = " (default)"
			case t.Pathological:
				tag = " (pathological)"
			}
			fmt.Fprintf(&b, "\n### `%s`%s\n\n%s.\n", t.Name, tag, t.Doc)
			if len(t.Params) == 0 {
				b.WriteString("\nNo parameters.\n")
				continue
			}
			b.WriteString("\n| parameter | type | unit | default | range | meaning |\n|---|---|---|---|---|---|\n")
			for _, p := range t.Params {
				r := p.RangeString()
				if p.Keys != nil {
					r = "keys " + strings.Join(p.Keys, ", ") + "; weights >= 0, not all 0"
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s | `%s` | %s | %s |\n", p.Name, p.Type, p.Unit, p.DefaultString(), r, p.Doc)
			}
		}
	}
	return b.Bytes()
}
