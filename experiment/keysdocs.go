package experiment

import (
	"strings"

	"github.com/blis-sim/blis/internal/schema"
)

// KeysMarkdown is docs/experiment.md's table of every key: its type and
// unit, default, range, flag and meaning, generated from the declarations
// (go test ./experiment -run KeysDoc -update).
func KeysMarkdown() string {
	var b strings.Builder
	b.WriteString("| key | type | unit | default | range | flag | meaning |\n|---|---|---|---|---|---|---|\n")
	for _, d := range Keys {
		k := d.Key
		def := k.DefaultString()
		if def != "" {
			def = "`" + def + "`"
		}
		flag := flagOf(d.Path)
		if flag != "" {
			flag = "`" + flag + "`"
		}
		b.WriteString("| `" + d.Path + "` | " + typeName(k) + " | " + k.Unit + " | " + def + " | " + rangeText(k) + " | " + flag + " | " + k.Doc + " |\n")
	}
	return b.String()
}

func typeName(k *schema.Key) string {
	if k.Type == schema.List {
		return "list of " + itoa(k.Len)
	}
	return string(k.Type)
}

// rangeText is k's range for the docs ("" when any value of its type
// goes).
func rangeText(k *schema.Key) string {
	r := k.RangeString()
	if r == "finite" || (k.Type == schema.Int && k.Min <= -9.2e18 && k.Max >= 9.2e18) {
		return ""
	}
	return r
}
