package sweep

import (
	"encoding/json"
	"io"
)

// WritePlan writes the plan as blis sweep --emit plan prints it: the
// sweep's size and its table's columns, as indented JSON.
func (p *Plan) WritePlan(w io.Writer) error {
	type col struct {
		Name string `json:"name"`
		Type string `json:"type"`
		Unit string `json:"unit,omitempty"`
	}
	v := struct {
		Points  int   `json:"points"`
		Seeds   int   `json:"seeds"`
		Runs    int   `json:"runs"`
		Cluster bool  `json:"forced_cluster,omitempty"`
		Columns []col `json:"columns"`
	}{Points: p.Points, Seeds: p.Seeds, Runs: p.Runs, Cluster: p.Cluster}
	for _, c := range p.Columns {
		v.Columns = append(v.Columns, col{c.Name, c.Kind.String(), c.Unit})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
