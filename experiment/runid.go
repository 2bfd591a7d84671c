package experiment

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/blis-sim/blis/sim/workload"
)

// traceRunID is the run's simtrace.Options.RunID: the first 8 bytes of the
// SHA-256 of the run's configuration as the report echoes it (which holds
// the seed) and of the content of every input file (the replayed trace,
// the workload spec or scenario, coefficients, model and hardware files),
// so that two runs that differ in anything (the rate, a replayed file
// rewritten in place) give their traces different request, trace and span
// ids and can be ingested together, and the same run gives the same trace.
// Trace options are not part of it: two traces of one run describe the
// same requests. Never 0 (0 means no salt).
func (e *Experiment) traceRunID(config any) (uint64, error) {
	h := sha256.New()
	io.WriteString(h, "blis run trace ids v1\n")
	if err := json.NewEncoder(h).Encode(config); err != nil {
		return 0, err
	}
	w := &e.Workload
	replay := ""
	if w.Kind == Replay {
		replay = w.Replay.Path
		if fi, err := os.Stat(replay); err == nil && fi.IsDir() {
			replay = filepath.Join(replay, "requests.parquet")
		}
	}
	if w.Kind == Scenario {
		text, err := workload.ScenarioText(w.Scenario)
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(h, "scenario %d\n", len(text))
		h.Write(text)
	}
	// A deployment file is not hashed: everything it says is in the
	// echoed configuration, so --deployment and the --config form of the
	// same run give the same ids.
	inputs := []struct{ label, path string }{{"replay", replay}, {"workload-spec", w.File}}
	seen := map[string]bool{}
	for _, p := range e.Deployment.Pools {
		s := p.Instance
		for _, in := range []struct{ label, path string }{{"coefficients", s.Latency.Coefficients}, {"model", s.Model}, {"hardware", s.Hardware}} {
			if !seen[in.label+"\x00"+in.path] {
				seen[in.label+"\x00"+in.path] = true
				inputs = append(inputs, in)
			}
		}
	}
	for _, in := range inputs {
		fi, err := os.Stat(in.path)
		if in.path == "" || err != nil || !fi.Mode().IsRegular() {
			continue // unset, or a shipped name (the echoed configuration names it)
		}
		f, err := os.Open(in.path)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", in.label, err)
		}
		fmt.Fprintf(h, "%s %d\n", in.label, fi.Size())
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", in.label, err)
		}
	}
	id := binary.BigEndian.Uint64(h.Sum(nil))
	if id == 0 {
		id = 1
	}
	return id, nil
}
