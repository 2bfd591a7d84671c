package experiment

import (
	"fmt"
	"io"
	"strings"

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
		}
	}
}

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

// Usage prints a command's usage with its flags (fs) in the sections of
// FlagGroups, the flags that are not an experiment's (files, --set,
// printing) first.
func Usage(w io.Writer, useLine, example string, fs *pflag.FlagSet) error {
	fmt.Fprintf(w, "Usage:\n  %s\n", useLine)
	if example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", example)
	}
	sets := map[string]*pflag.FlagSet{}
	const general = "Experiment files and printing"
	order := []string{general}
	for _, g := range FlagGroups {
		order = append(order, g.Title)
	}
	fs.VisitAll(func(fl *pflag.Flag) {
		g := GroupOf(fl.Name)
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
			fmt.Fprintf(w, "\n%s:\n%s", g, s.FlagUsages())
		}
	}
	return nil
}

// ShippedNames lists the model and hardware names --model and --hardware
// accept besides file paths.
func ShippedNames() string {
	return "Shipped models (--model): " + strings.Join(physics.BuiltinModels(), ", ") +
		"\nShipped hardware (--hardware): " + strings.Join(physics.BuiltinHardware(), ", ")
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
