package main

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
// SHA-256 of the run's configuration as the output echoes it (which holds
// the seed) and of the content of every input file (--replay, the workload
// spec or scenario, --deployment, --coefficients, --model and --hardware
// files), so that two runs that differ in anything (--rate, a replayed
// file rewritten in place) give their traces different request, trace and
// span ids and can be ingested together, and the same run gives the same
// trace. Trace options are not part of it: two traces of one run describe
// the same requests. Never 0 (0 means no salt).
func traceRunID(config any, o *runOpts) (uint64, error) {
	h := sha256.New()
	io.WriteString(h, "blis run trace ids v1\n")
	if err := json.NewEncoder(h).Encode(config); err != nil {
		return 0, err
	}
	replay := o.replay
	if fi, err := os.Stat(replay); err == nil && fi.IsDir() {
		replay = filepath.Join(replay, "requests.parquet")
	}
	if o.scenario != "" {
		text, err := workload.ScenarioText(o.scenario)
		if err != nil {
			return 0, fmt.Errorf("--scenario: %w", err)
		}
		fmt.Fprintf(h, "scenario %d\n", len(text))
		h.Write(text)
	}
	for _, in := range []struct{ label, path string }{
		{"replay", replay}, {"workload-spec", o.specFile}, {"deployment", o.cl.deployment},
		{"coefficients", o.coeffs}, {"model", o.model}, {"hardware", o.hardware},
	} {
		fi, err := os.Stat(in.path)
		if in.path == "" || err != nil || !fi.Mode().IsRegular() {
			continue // unset, or a shipped name (the echoed configuration names it)
		}
		f, err := os.Open(in.path)
		if err != nil {
			return 0, fmt.Errorf("--%s: %w", in.label, err)
		}
		fmt.Fprintf(h, "%s %d\n", in.label, fi.Size())
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("--%s: %w", in.label, err)
		}
	}
	id := binary.BigEndian.Uint64(h.Sum(nil))
	if id == 0 {
		id = 1
	}
	return id, nil
}
