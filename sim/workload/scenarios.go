package workload

import (
	"embed"
	"fmt"
	"slices"
	"strings"

	"github.com/blis-sim/blis/internal/clip"
)

//go:embed scenarios/*.yaml
var scenarioFS embed.FS

// Scenarios lists the built-in scenarios' names, sorted.
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

// ScenarioText is a built-in scenario's spec file, comments included, as
// --print-spec shows it.
func ScenarioText(name string) ([]byte, error) {
	if !slices.Contains(Scenarios(), name) {
		return nil, fmt.Errorf("no scenario %q; the scenarios are %s", clip.String(name), strings.Join(Scenarios(), ", "))
	}
	return scenarioFS.ReadFile("scenarios/" + name + ".yaml")
}

// Scenario is a built-in scenario, parsed.
func Scenario(name string) (*WorkloadSpec, error) {
	data, err := ScenarioText(name)
	if err != nil {
		return nil, err
	}
	return ParseSpec(data, "scenario "+name)
}
