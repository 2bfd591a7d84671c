package fit

import (
	"fmt"
	"path/filepath"
	"strings"
	"unicode"
)

// checkDuplicates refuses a fit whose configurations list one trace twice
// (the same steps table, by content hash): its samples would count twice.
func checkDuplicates(cfgs []Config) error {
	seen := map[string]string{} // sha256 of a steps table → where it was first listed
	for _, cfg := range cfgs {
		for _, tr := range cfg.Traces {
			for _, in := range tr.Inputs {
				if filepath.Base(in.Path) != "steps.parquet" || in.SHA256 == "" {
					continue
				}
				where := fmt.Sprintf("configuration %s, trace %s", cfg.Name, tr.Dir)
				if first, ok := seen[in.SHA256]; ok {
					return fmt.Errorf("%s has the same steps table as %s (sha256 %s): listing one trace twice counts its samples twice", where, first, in.SHA256[:12])
				}
				seen[in.SHA256] = where
			}
		}
	}
	return nil
}

// crossCheck compares what a trace shows with the configuration it is
// fitted as. What cannot be (more running requests than max_num_seqs, more
// scheduled tokens than max_batched_tokens, a prefill chunk when chunked
// prefill is off) is an error naming the step; a model name that does not
// match is a warning, since served names are free text.
func crossCheck(cfg *Config, tr *Trace) (warnings []string, err error) {
	k := cfg.Phys.Knobs
	for i := range tr.Steps {
		s := &tr.Steps[i]
		switch {
		case s.Running > k.MaxNumSeqs:
			return nil, fmt.Errorf("configuration %s: %s: step %d runs %d requests at once, more than the configuration's max_num_seqs %d: give the server's value",
				cfg.Name, tr.Dir, s.ID, s.Running, k.MaxNumSeqs)
		case s.Scheduled > k.MaxBatchedTokens:
			return nil, fmt.Errorf("configuration %s: %s: step %d schedules %d tokens, more than the configuration's max_batched_tokens %d: give the server's value",
				cfg.Name, tr.Dir, s.ID, s.Scheduled, k.MaxBatchedTokens)
		}
	}
	if !k.ChunkedPrefillEnabled {
		for _, sn := range tr.Snapshots {
			if sn.Prefill && sn.Scheduled > 0 && sn.Computed+sn.Scheduled < sn.Prompt {
				return nil, fmt.Errorf("configuration %s: %s: step %d schedules %d of request %q's %d prompt tokens (%d computed): a prefill chunk, but the configuration has chunked prefill off: give the server's setting",
					cfg.Name, tr.Dir, sn.StepID, sn.Scheduled, sn.Request, sn.Prompt, sn.Computed)
			}
		}
	}
	if len(tr.Models) > 0 && !anyModelMatches(cfg.Phys.Model.Name, tr.Models) {
		warnings = append(warnings, fmt.Sprintf("%s: the requests name the model %s, but the configuration's model is %q: check the model given",
			tr.Dir, quoteList(tr.Models[:min(3, len(tr.Models))]), cfg.Phys.Model.Name))
	}
	return warnings, nil
}

// anyModelMatches reports whether a served model name (free text such as
// "meta-llama/Llama-3.1-8B-Instruct") names the model: after the last "/",
// with case and punctuation ignored, one contains the other.
func anyModelMatches(model string, served []string) bool {
	key := func(s string) string {
		if i := strings.LastIndex(s, "/"); i >= 0 {
			s = s[i+1:]
		}
		return strings.Map(func(r rune) rune {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				return unicode.ToLower(r)
			}
			return -1
		}, s)
	}
	m := key(model)
	for _, s := range served {
		if k := key(s); m != "" && k != "" && (strings.Contains(k, m) || strings.Contains(m, k)) {
			return true
		}
	}
	return false
}
