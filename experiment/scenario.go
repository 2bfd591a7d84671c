package experiment

import (
	"embed"
	"fmt"
	"slices"
	"strings"

	"github.com/blis-sim/blis/internal/clip"
)

// Built-in experiments: whole experiment files (a deployment, a workload,
// a policy bundle) that blis run --scenario NAME starts from, as it would
// from --config. The workload scenarios of package workload are workloads
// only.
//
//go:embed scenarios/*.yaml
var scenarioFS embed.FS

// Scenarios lists the built-in experiments' names, sorted.
func Scenarios() []string {
	ents, err := scenarioFS.ReadDir("scenarios")
	if err != nil {
		panic(err) // embedded at build time
	}
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(names)
	return names
}

// IsScenario reports whether name is a built-in experiment.
func IsScenario(name string) bool { return slices.Contains(Scenarios(), name) }

// ScenarioText is a built-in experiment's file, comments included.
func ScenarioText(name string) ([]byte, error) {
	if !IsScenario(name) {
		return nil, fmt.Errorf("no built-in experiment %q; they are %s", clip.String(name), strings.Join(Scenarios(), ", "))
	}
	return scenarioFS.ReadFile("scenarios/" + name + ".yaml")
}

// LoadScenario is the draft of built-in experiment name; errors name it
// as "scenario NAME:LINE".
func LoadScenario(name string) (*Draft, error) {
	data, err := ScenarioText(name)
	if err != nil {
		return nil, err
	}
	return Parse(data, "scenario "+name)
}
