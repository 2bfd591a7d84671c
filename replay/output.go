package replay

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/blis-sim/blis/validate"
)

// WriteText prints r as blis validate does without --json: what was
// read, the calibration's flags, the deployment, the comparison table
// and the phases of the engine counters.
func (r *Report) WriteText(out io.Writer) error {
	rep := r.Records
	fmt.Fprintf(out, "%s: %d requests (%d rows, %d skipped), measured at the %s\n", r.source, rep.Read, rep.Rows, rep.Rows-rep.Read, r.MeasuredAt)
	if r.ComparedOnly != "" {
		fmt.Fprintf(out, "compared: %s; every request is replayed\n", r.ComparedOnly)
	}
	if cal := r.Calibrated; cal != nil {
		keys := sortedKeys(cal.Flags)
		fmt.Fprintf(out, "calibrated:")
		for _, k := range keys {
			fmt.Fprintf(out, " --%s %g", k, cal.Flags[k])
		}
		fmt.Fprintf(out, " (loss %.4f -> %.4f, %d simulations)\n", cal.StartLoss, cal.Loss, cal.Simulations)
		var dep, pipe []string
		for _, k := range keys {
			f := fmt.Sprintf("--%s %g", k, cal.Flags[k])
			if slices.Contains(cal.Pipeline, k) {
				pipe = append(pipe, f)
			} else {
				dep = append(dep, f)
			}
		}
		if len(dep) > 0 {
			fmt.Fprintf(out, "  for runs of this GPU, model and parallelism only: %s\n", strings.Join(dep, " "))
		}
		if len(pipe) > 0 {
			fmt.Fprintf(out, "  for any deployment on this vLLM build and host: %s\n", strings.Join(pipe, " "))
		}
	}
	desc := r.Deployment
	fmt.Fprintf(out, "deployment: %s on %d × %s, TP %d, max_num_seqs %d, max_num_batched_tokens %d, %d KV blocks, async scheduling %v, output delay %d µs, latency model %s\n\n",
		desc.Model, r.Engines, desc.Hardware, desc.TP, desc.VLLM.MaxNumSeqs, desc.VLLM.MaxBatchedTokens, desc.VLLM.TotalKVBlocksGPU, desc.Async, desc.OutputDelay, desc.Latency)
	if l := r.Lockstep; l != nil {
		fmt.Fprintf(out, "data-parallel lockstep: the engines' steps waited %.1f ms for a slower engine (%.1f %% of their busy time); %d dummy batches\n\n",
			l.WaitMs, 100*l.WaitMs/max(r.busyMs, 1e-9), l.DummySteps)
	}
	if err := r.Compare.WriteTable(out); err != nil {
		return err
	}
	if r.Phases == nil {
		return nil
	}
	c := r.counters
	fmt.Fprintf(out, "\nengine counters: %s, %d ticks of %g s measured, %d simulated; step = running requests / generated tokens per second, per engine\n",
		c.Path, len(c.Ticks), float64(c.TickUs)/1e6, r.windows)
	return validate.WritePhases(out, r.Phases)
}

// WritePlot draws simulated against measured TTFT, ITL and E2E per
// request in format (validate.Formats).
func (r *Report) WritePlot(w io.Writer, format string) error {
	d := r.Deployment
	title := fmt.Sprintf("%s on %d × %s (TP %d)", d.Model, r.Engines, d.Hardware, d.TP)
	return validate.WritePlot(w, r.Pairs, title, format)
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
