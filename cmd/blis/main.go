// Command blis simulates vLLM serving deployments. run simulates one vLLM
// instance, or a cluster of them behind admission and a router, serving a
// workload, and prints its metrics as JSON; it can also write the run as a
// vLLM trace for calibrate.
package main

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/blis-sim/blis/experiment"
	"github.com/blis-sim/blis/internal/flagerr"
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
		Use:           "blis",
		Short:         "Simulate vLLM serving before you buy the GPUs",
		Long:          help("blis"),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(flagerr.Rewrite) // a value that does not parse names its flag
	// Flags wrapped to the width of blis run's grouped help (experiment.HelpWidth).
	root.SetUsageTemplate(strings.ReplaceAll(root.UsageTemplate(), ".FlagUsages", ".FlagUsagesWrapped "+strconv.Itoa(experiment.HelpWidth)))
	root.AddCommand(newRunCmd(), newValidateCmd())
	root.AddCommand(newSweepCmd())
	root.AddCommand(newCapacityCmd())
	return root
}

// The commands' long descriptions, prose kept beside the code.
//
//go:embed help/*.txt
var helpFS embed.FS

// help is the long description of command name (help/NAME.txt).
func help(name string) string {
	b, err := helpFS.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic(err) // embedded at build time
	}
	return string(b)
}
