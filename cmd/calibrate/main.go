// Command calibrate turns vLLM traces into physics-model coefficients.
// physics shows the derived constants and feature vectors of a (model,
// hardware, TP, vLLM knobs) configuration; ingest turns OTLP traces and
// KV-event logs into Parquet tables; receive is an OTLP receiver that
// writes the traces vLLM exports into files ingest reads; fit trains the
// beta and alpha coefficients on those tables (package fit, docs/fit.md)
// and writes a
// coefficient file and a validation report; predict applies a coefficient
// file to batch compositions (--batches) or scores it on a trace's tables
// (--tables).
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/blis-sim/blis/internal/flagerr"
)

func main() {
	// Ctrl-C or SIGTERM: remove the outputs' temporaries and exit (130,
	// 143); nothing half written is committed. receive turns this off and
	// drains instead.
	var once sync.Once
	stop := atomicfile.ExitOnSignal("calibrate", os.Stderr)
	stopExitOnSignal = func() { once.Do(stop) }
	defer stopExitOnSignal()
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "calibrate:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "calibrate",
		Short:         "Calibrate the physics-normalized latency model of vLLM serving",
		Long:          rootLong(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// A flag value that does not parse names the flag and what it takes.
	root.SetFlagErrorFunc(flagerr.Rewrite)
	// Flags wrapped to the width of blis run's grouped help (experiment.HelpWidth).
	root.SetUsageTemplate(strings.ReplaceAll(root.UsageTemplate(), ".FlagUsages", ".FlagUsagesWrapped "+strconv.Itoa(experiment.HelpWidth)))
	root.AddCommand(newPhysicsCmd(), newIngestCmd(), newFitCmd(), newPredictCmd(), newReceiveCmd())
	return root
}

// rootLong is calibrate's description, its default feature spec from
// features.DefaultSpec (the one calibrate fit uses).
func rootLong() string {
	width := func(spec string) int {
		n, err := features.BetaNamesOf(spec)
		if err != nil {
			panic(err) // the specs are constants
		}
		return len(n)
	}
	var others []string
	for _, s := range []string{features.SpecV3, features.SpecV2, features.SpecV1} {
		if s != features.DefaultSpec {
			others = append(others, fmt.Sprintf("%s's %d", s, width(s)))
		}
	}
	para := fmt.Sprintf("calibrate works with the physics-normalized latency model that the blis simulator uses: "+
		"%d alpha features for queueing delay and %d beta features for step time (feature spec %s, calibrate fit's default; "+
		"--feature-spec takes %s), each normalized by the hardware ceiling that governs it.",
		features.NumAlpha, width(features.DefaultSpec), features.DefaultSpec, strings.Join(others, " or "))
	return experiment.Wrap(para, 80) + `

The formulas are in docs/physics-spec.md; the trace tables in docs/ingest.md;
tracing vLLM, and receiving its traces with no collector, in
docs/vllm-tracing.md.`
}

// printNotes shows the notes of a model config (values the config left out
// and were assumed) on stderr.
func printNotes(stderr io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintln(stderr, "calibrate: note:", n)
	}
}
