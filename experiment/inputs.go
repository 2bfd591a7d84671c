package experiment

import (
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/inputfile"
	"github.com/blis-sim/blis/internal/schema"
	"github.com/blis-sim/blis/sim/workload"
)

// Inputs are everything an experiment is assembled from, as a command
// line gives them: a built-in experiment (a --scenario that names one),
// an experiment file or a deployment file, a policy file, the experiment
// flags given explicitly and --set. Inputs.Draft is the one place their
// precedence lives: blis run, sweep, capacity and validate (and the Python
// driver, through blis sweep) all assemble their experiment with it.
type Inputs struct {
	Config     string // an experiment file (--config)
	Deployment string // a deployment file, the earlier form (--deployment)
	Policies   string // a policy file (--policy-config)
	// Flags are the experiment flags given explicitly (Flags' names,
	// without dashes), in any order: each sets its key.
	Flags []FlagValue
	// Sets are KEY=VALUE settings (--set), applied last, in order.
	Sets []string
}

// FlagValue is an experiment flag given on the command line.
type FlagValue struct{ Name, Value string }

// flag is the value of the flag called name, and whether it was given.
func (in Inputs) flag(name string) (string, bool) {
	for _, f := range in.Flags {
		if f.Name == name {
			return f.Value, true
		}
	}
	return "", false
}

// Draft assembles the inputs, each over the one before: the built-in
// experiment or the experiment file (not both) or a deployment file, the
// policy file, the flags, then --set. A cluster flag (Flag.Cluster) or a
// deployment file makes the experiment a cluster. Errors name the input
// at fault.
func (in Inputs) Draft() (*Draft, error) {
	d := NewDraft()
	var err error
	if sc, ok := in.flag("scenario"); ok && IsScenario(sc) {
		if in.Config != "" || in.Deployment != "" {
			return nil, fmt.Errorf("--scenario %s is a built-in experiment: combine it with flags and --set, not with --config or --deployment (blis run --scenario %s --print-config writes it as a file to start from)", sc, sc)
		}
		if d, err = LoadScenario(sc); err != nil {
			return nil, fmt.Errorf("--scenario: %w", err)
		}
	}
	if in.Config != "" {
		if d, err = Load(in.Config); err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
	}
	if in.Deployment != "" {
		if err := d.LoadDeployment(in.Deployment); err != nil {
			return nil, fmt.Errorf("--deployment: %w", err)
		}
	}
	if in.Policies != "" {
		if err := d.LoadPolicies(in.Policies); err != nil {
			return nil, fmt.Errorf("--policy-config: %w", err)
		}
	}
	if err := d.ApplyFlags(in.Flags); err != nil {
		return nil, err
	}
	if in.Deployment != "" {
		if err := d.Set("deployment.mode", string(ModeCluster), "--deployment"); err != nil {
			return nil, err
		}
	}
	for _, s := range in.Sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("--set %q: want KEY=VALUE", clip.String(s))
		}
		if err := d.Set(strings.TrimSpace(k), v, "--set "+strings.TrimSpace(k)); err != nil {
			var ke *schema.Error
			if errors.As(err, &ke) {
				return nil, err // named by its --set already
			}
			return nil, fmt.Errorf("--set: %w", err)
		}
	}
	return d, nil
}

// ApplyFlags sets every flag given on the draft, in Flags' order (a
// --scenario naming a built-in experiment is the draft's base, not a
// key); a cluster flag also makes the experiment a cluster.
func (d *Draft) ApplyFlags(given []FlagValue) error {
	in := Inputs{Flags: given}
	_, replay := in.flag("replay")
	_, format := in.flag("replay-format")
	_, strict := in.flag("strict")
	if (format || strict) && !replay {
		return errors.New("--replay-format and --strict apply to --replay FILE")
	}
	cluster := ""
	for _, fl := range Flags {
		v, ok := in.flag(fl.Name)
		if !ok || (fl.Name == "scenario" && IsScenario(v)) {
			continue
		}
		if err := d.SetFlag(fl.Name, v); err != nil {
			return err
		}
		if fl.Cluster && cluster == "" {
			cluster = "--" + fl.Name
		}
	}
	for _, f := range given {
		if _, ok := LookupFlag(f.Name); !ok {
			return fmt.Errorf("--%s is not a flag of an experiment", f.Name)
		}
	}
	if cluster != "" {
		return d.Set("deployment.mode", string(ModeCluster), cluster)
	}
	return nil
}

// FlagGiven reports whether the flag called name (without dashes) was
// applied to the draft from the command line.
func (d *Draft) FlagGiven(name string) bool {
	for _, f := range d.flags {
		if f == "--"+name {
			return true
		}
	}
	return false
}

// SpecText is the workload spec e runs, as a file to start a spec of one's
// own from (blis run --print-spec): a built-in scenario's file, a spec
// file, or a spec written in the experiment.
func (e *Experiment) SpecText() ([]byte, error) {
	w := e.Workload
	switch w.Kind {
	case Scenario:
		return workload.ScenarioText(w.Scenario)
	case SpecFile:
		return inputfile.Read(w.File)
	case SpecNode:
		return yaml.Marshal(w.Node)
	}
	return nil, errors.New("--print-spec needs --scenario NAME or --workload-spec FILE")
}
