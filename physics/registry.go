package physics

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/blis-sim/blis/internal/inputfile"
)

// The shipped configs are embedded so that the CLI works from any directory.
//
//go:embed data/models/*.json data/hardware/*.json data/gemm/*.csv
var builtinFS embed.FS

// BuiltinModels lists the names of the shipped model configs, sorted.
func BuiltinModels() []string { return builtinNames("data/models") }

// BuiltinHardware lists the names of the shipped hardware specs, sorted.
func BuiltinHardware() []string { return builtinNames("data/hardware") }

func builtinNames(dir string) []string {
	entries, err := fs.ReadDir(builtinFS, dir)
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(names)
	return names
}

// normalizeName lets "meta-llama/Llama-3.1-8B", "Llama-3.1-8B" and
// "llama-3.1-8b" all name the same shipped file, and "H100-SXM" name h100-sxm.
func normalizeName(s string) string {
	s = strings.ToLower(path.Base(strings.TrimSpace(s)))
	s = strings.TrimSuffix(s, ".json")
	s = strings.TrimSuffix(s, "-hf")
	return s
}

// readNamed reads a file when ref is an existing path, else a shipped entry.
func readNamed(ref, dir, kind string, names []string) ([]byte, string, error) {
	if st, err := os.Stat(ref); err == nil && !st.IsDir() {
		data, err := inputfile.Read(ref)
		return data, ref, err
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, ref, err
	}
	want := normalizeName(ref)
	for _, n := range names {
		if n == want {
			data, err := builtinFS.ReadFile(dir + "/" + n + ".json")
			return data, "builtin:" + n, err
		}
	}
	return nil, ref, fmt.Errorf("%s %q is neither a file nor a shipped %s (shipped: %s)", kind, ref, kind, strings.Join(names, ", "))
}

// LoadModel loads a model config from a config.json path or a shipped name.
func LoadModel(ref string) (ModelSpec, error) {
	data, src, err := readNamed(ref, "data/models", "model", BuiltinModels())
	if err != nil {
		return ModelSpec{}, err
	}
	m, err := ParseModelConfig(data, src)
	if err != nil {
		return ModelSpec{}, err
	}
	if m.Name == "" {
		m.Name = strings.TrimPrefix(src, "builtin:")
	}
	return m, nil
}

// LoadHardware loads a hardware spec from a JSON path or a shipped name.
func LoadHardware(ref string) (HardwareSpec, error) {
	data, src, err := readNamed(ref, "data/hardware", "hardware", BuiltinHardware())
	if err != nil {
		return HardwareSpec{}, err
	}
	h, err := ParseHardwareSpec(data, src)
	if err != nil {
		return HardwareSpec{}, err
	}
	if h.Name == "" {
		h.Name = strings.TrimPrefix(src, "builtin:")
	}
	return h, nil
}

// HardwareForDevice is the shipped hardware spec whose device_names list
// name (as CUDA reports it, e.g. "NVIDIA H100 80GB HBM3"), compared
// without case; false when none does.
func HardwareForDevice(name string) (HardwareSpec, bool) {
	want := strings.ToLower(strings.TrimSpace(name))
	if want == "" {
		return HardwareSpec{}, false
	}
	for _, n := range BuiltinHardware() {
		h, err := LoadHardware(n)
		if err != nil {
			continue
		}
		for _, d := range h.DeviceNames {
			if strings.ToLower(d) == want {
				return h, true
			}
		}
	}
	return HardwareSpec{}, false
}
