// Command blis simulates vLLM serving deployments. run simulates one vLLM
// instance, or a cluster of them behind admission and a router, serving a
// workload, and prints its metrics as JSON; it can also write the run as a
// vLLM trace for calibrate.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/blis-sim/blis/physics"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "blis:", err)
		var status interface{ ExitCode() int }
		if errors.As(err, &status) {
			os.Exit(status.ExitCode()) // blis sweep: 100 + the failed runs
		}
		if errors.Is(err, errInterrupted) {
			os.Exit(130) // the shell's status for a SIGINT
		}
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "blis",
		Short: "Simulate vLLM serving before you buy the GPUs",
		Long: `blis is a deterministic discrete-event simulator of vLLM instances, alone
or as a cluster behind admission and a router (see docs/cluster.md). Its
latency models are the physics-normalized model fitted by calibrate, an
analytical roofline, or a blackbox regression.

Results go to stdout as JSON and are byte-identical for the same inputs and
--seed; diagnostics go to stderr. See docs/simulator.md.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCmd(), newValidateCmd())
	root.AddCommand(newSweepCmd())
	root.AddCommand(newCapacityCmd())
	return root
}

// printModelNotes shows on stderr where a model config left a value out
// and it was assumed (physics.ModelSpec.Notes), each note once.
func printModelNotes(stderr io.Writer, models ...physics.ModelSpec) {
	seen := map[string]bool{}
	for _, m := range models {
		for _, n := range m.Notes {
			if !seen[n] {
				seen[n] = true
				fmt.Fprintln(stderr, "blis: note:", n)
			}
		}
	}
}
