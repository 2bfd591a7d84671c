package main

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadManifest: any --configs file gives configurations or an error
// naming the file, never a panic, and every configuration it accepts has
// the required fields.
func FuzzReadManifest(f *testing.F) {
	f.Add("configs:\n  - name: a\n    tables: [t]\n    model: llama-3.1-8b\n    hardware: h100-sxm\n    tp: 2\n    vllm: {max_num_seqs: 64}\n")
	f.Add("configs: []\n")
	f.Add("configs:\n  - {name: a, tables: [x, /y], model: m, hardware: h, vllm: {block_size_tokens: -1}}\n")
	f.Add("- a\n")
	f.Fuzz(func(t *testing.T, body string) {
		p := filepath.Join(t.TempDir(), "m.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		specs, err := readManifest(p)
		if err != nil {
			return
		}
		if len(specs) == 0 {
			t.Fatal("no error and no configuration")
		}
		for _, s := range specs {
			if s.name == "" || s.model == "" || s.hardware == "" || len(s.dirs) == 0 || s.tp == 0 {
				t.Fatalf("accepted an incomplete configuration: %+v", s)
			}
		}
	})
}
