package experiment

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/blis-sim/blis/physics"
)

// AddFlags defines on fs the flags of Flags that keep selects, with their
// defaults and help: how blis run, sweep, capacity and validate take the
// experiment's keys from a command line.
func AddFlags(fs *pflag.FlagSet, keep func(Flag) bool) {
	for _, fl := range Flags {
		if !keep(fl) {
			continue
		}
		switch fl.Type {
		case "bool":
			fs.Bool(fl.Name, fl.Default == "true", fl.Help)
		case "int":
			var n int64
			fmt.Sscan(fl.Default, &n)
			fs.Int64(fl.Name, n, fl.Help)
		case "float":
			var x float64
			fmt.Sscan(fl.Default, &x)
			fs.Float64(fl.Name, x, fl.Help)
		default:
			fs.String(fl.Name, fl.Default, fl.Help)
			continue
		}
		// The value is kept as given and decoded by the key's declaration
		// (SetFlag): a fraction in a whole-number flag, 1e300 or NaN is
		// refused naming the flag with the key's range and unit, as in a
		// file, not with the parser's words. Help shows the same type and
		// default.
		f := fs.Lookup(fl.Name)
		text := textValue{text: f.Value.String(), typ: f.Value.Type()}
		if fl.Type == "bool" {
			f.Value = &boolText{text}
		} else {
			f.Value = &text
		}
	}
}

// textValue is a flag's value as given, of the type help shows.
type textValue struct{ text, typ string }

func (v *textValue) String() string     { return v.text }
func (v *textValue) Set(s string) error { v.text = s; return nil }
func (v *textValue) Type() string       { return v.typ }

// boolText is a boolean flag's: --flag alone is true.
type boolText struct{ textValue }

func (*boolText) IsBoolFlag() bool { return true }

// GivenFlags are the flags of Flags given explicitly on fs, but those
// skip names (a command's own flag of the same name).
func GivenFlags(fs *pflag.FlagSet, skip map[string]bool) []FlagValue {
	var out []FlagValue
	for _, fl := range Flags {
		if f := fs.Lookup(fl.Name); f != nil && f.Changed && !skip[fl.Name] {
			out = append(out, FlagValue{Name: fl.Name, Value: f.Value.String()})
		}
	}
	return out
}

// HelpWidth is the width help is wrapped to, in columns.
const HelpWidth = 100

// Section is a group of a command's own flags, shown before the
// experiment's in its usage (blis sweep's grid and table, blis capacity's
// search).
type Section struct {
	Title string
	Flags []string
}

// Usage prints a command's usage: its own sections first, then the flags
// that are not an experiment's keys (files, --set, printing), then the
// experiment's flags in the sections of FlagGroups, each wrapped to
// HelpWidth.
func Usage(w io.Writer, useLine, example string, fs *pflag.FlagSet, own ...Section) error {
	fmt.Fprintf(w, "Usage:\n  %s\n", useLine)
	if example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", example)
	}
	sets := map[string]*pflag.FlagSet{}
	const general = "Experiment files and printing"
	var order []string
	section := map[string]string{}
	for _, o := range own {
		order = append(order, o.Title)
		for _, name := range o.Flags {
			section[name] = o.Title
		}
	}
	order = append(order, general)
	for _, g := range FlagGroups {
		order = append(order, g.Title)
	}
	fs.VisitAll(func(fl *pflag.Flag) {
		g := section[fl.Name]
		if g == "" {
			g = GroupOf(fl.Name)
		}
		if g == "" {
			g = general
		}
		if sets[g] == nil {
			sets[g] = pflag.NewFlagSet(g, pflag.ContinueOnError)
			sets[g].SortFlags = false
		}
		sets[g].AddFlag(fl)
	})
	for _, g := range order {
		if s := sets[g]; s != nil {
			fmt.Fprintf(w, "\n%s:\n%s", g, s.FlagUsagesWrapped(HelpWidth))
		}
	}
	return nil
}

// ShippedNames lists the model and hardware names --model and --hardware
// accept besides file paths.
func ShippedNames() string {
	return Wrap("Shipped models (--model): "+strings.Join(physics.BuiltinModels(), ", "), HelpWidth) +
		"\n" + Wrap("Shipped hardware (--hardware): "+strings.Join(physics.BuiltinHardware(), ", "), HelpWidth)
}

// Wrap breaks s into lines of at most width columns at spaces (a word
// longer than width keeps its own line).
func Wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		l := utf8.RuneCountInString(w)
		switch {
		case i == 0:
		case n+1+l > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += l
	}
	return b.String()
}

// FlagOf is the flag of an output key ("--decision-trace"), for errors
// about the file; the key itself when no flag sets it.
func FlagOf(key string) string {
	for _, f := range Flags {
		if f.Key == key {
			return "--" + f.Name
		}
	}
	return key
}
