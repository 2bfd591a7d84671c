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
	"sync"

	"github.com/blis-sim/blis/internal/atomicfile"
	"github.com/spf13/cobra"
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
		Use:   "calibrate",
		Short: "Calibrate the physics-normalized latency model of vLLM serving",
		Long: `calibrate works with the physics-normalized latency model that the blis
simulator uses: 11 alpha features for queueing delay and the beta features for
step time (spec 2.0's 9 roofline terms by default, or spec 1.0's frozen 16),
each normalized by the hardware ceiling that governs it.

The formulas are in docs/physics-spec.md; the trace tables in docs/ingest.md;
tracing vLLM, and receiving its traces with no collector, in
docs/vllm-tracing.md.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newPhysicsCmd(), newIngestCmd(), newFitCmd(), newPredictCmd(), newReceiveCmd())
	return root
}

// printNotes shows the notes of a model config (values the config left out
// and were assumed) on stderr.
func printNotes(stderr io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintln(stderr, "calibrate: note:", n)
	}
}
