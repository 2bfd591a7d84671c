package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/internal/pqread"
)

// counts reads metrics.requests of a run's JSON as numbers by key (the
// instances' too, for a cluster), without the types of this build, so
// that the tests below also run against the code before their fixes.
func counts(t *testing.T, out string) (all map[string]int64, instances []map[string]int64) {
	t.Helper()
	var r struct {
		Metrics struct {
			Requests  map[string]any `json:"requests"`
			Instances []struct {
				Metrics struct {
					Requests map[string]any `json:"requests"`
				} `json:"metrics"`
			} `json:"instances"`
		} `json:"metrics"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	ints := func(m map[string]any) map[string]int64 {
		o := map[string]int64{}
		for k, v := range m {
			if f, ok := v.(float64); ok {
				o[k] = int64(f)
			}
		}
		return o
	}
	for _, in := range r.Metrics.Instances {
		instances = append(instances, ints(in.Metrics.Requests))
	}
	return ints(r.Metrics.Requests), instances
}

// --requests 9999999999999 panicked in the workload
// generator (makeslice: len out of range). The synthetic workload is
// streamed, on one instance as in a cluster: the run holds one request of
// it at a time, and the ones that had not arrived by the horizon are
// offered, not lost.
func TestHugeRequestCountIsStreamed(t *testing.T) {
	out, _, err := runCLI(t, "run", "-q", "--requests", "9999999999999", "--horizon", "2")
	require.NoError(t, err)
	n, _ := counts(t, out)
	require.Equal(t, int64(9999999999999), n["offered"])
	require.Greater(t, n["injected"], int64(0))

	out, _, err = runCLI(t, "run", "-q", "--requests", "9999999999999", "--horizon", "2", "--num-instances", "2")
	require.NoError(t, err)
	n, _ = counts(t, out)
	require.Greater(t, n["arrived"], int64(0))

	// A streamed workload that fails to generate still fails the run,
	// naming the cause.
	_, _, err = runCLI(t, "run", "-q", "--requests", "9999999999999", "--rate", "1e-300")
	require.ErrorContains(t, err, "an arrival time is beyond the clock's range")
}

// A replayed row with prompt_tokens and output_tokens
// of 2^62 overflowed prompt + output − 1 and panicked in the engine. The
// reader refuses it, naming the file, line and column.
func TestReplayOfHugeLengthsIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.csv")
	require.NoError(t, os.WriteFile(path, []byte("arrival_us,prompt_tokens,output_tokens\n0,10,5\n1,4611686018427387904,4611686018427387904\n"), 0o644))
	_, _, err := runCLI(t, "run", "-q", "--replay", path)
	require.EqualError(t, err, "--replay: "+path+":3: prompt_tokens: 4611686018427387904 is more than the simulator takes (1125899906842624)")
}

// --kv-blocks-gpu 2147483647 ran out of memory and
// --kv-blocks-cpu 99999999999 took 22 GB before the run started. Memory
// now follows the blocks used. The sizes here would take 2.5 GB if the
// allocation were eager again: enough to fail, not enough to take the
// machine (the reported sizes ran in 38 MB; docs/simulator.md).
func TestHugeKVCachesRun(t *testing.T) {
	for _, args := range [][]string{
		{"--kv-blocks-gpu", "67108864", "--kv-blocks-cpu", "16777216"},
		{"--kv-blocks-gpu", "67108864", "--kv-blocks-cpu", "16777216", "--num-instances", "2"},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, err := runCLI(t, append([]string{"run", "-q", "--requests", "50"}, args...)...)
		runtime.ReadMemStats(&after)
		require.NoError(t, err, "%v", args)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "bytes allocated by blis run %v", args)
	}
	_, _, err := runCLI(t, "run", "-q", "--kv-blocks-gpu", "2147483648")
	require.EqualError(t, err, "--kv-blocks-gpu: 2147483648 is more than this simulator addresses (2147483647)")
}

// The model's context was ignored (GPT-2 served
// 5,000-token prompts). A request whose prompt + output exceed
// max_model_len is rejected as vLLM rejects it, counted in
// rejected_too_long and reported on stderr, the first named by its file
// and line when replayed.
func TestRequestsLongerThanTheModelAreRejected(t *testing.T) {
	out, diag, err := runCLI(t, "run", "-q", "--model", "gpt2", "--prompt-tokens", "const:5000", "--requests", "50")
	require.NoError(t, err)
	n, _ := counts(t, out)
	require.Equal(t, int64(50), n["rejected_too_long"])
	require.Zero(t, n["completed"])
	require.Contains(t, diag, "warning: 50 requests rejected as vLLM rejects them (HTTP 400): prompt + output tokens exceed the model's context, max_model_len; the first, request 0, has 5000 + ")
	require.Contains(t, diag, " > 1024 tokens (counted in requests.rejected_too_long; see --max-model-len)")
	require.Contains(t, out, `"rejected_too_long": 50`)

	// Some fit: prompt + output <= 1024 is served, and nothing is said.
	out, diag, err = runCLI(t, "run", "-q", "--model", "gpt2", "--prompt-tokens", "const:900", "--output-tokens", "const:124",
		"--prefix-groups", "0", "--requests", "20")
	require.NoError(t, err)
	n, _ = counts(t, out)
	require.Equal(t, int64(20), n["completed"])
	require.NotContains(t, out, "rejected_too_long")
	require.Empty(t, diag)

	// --max-model-len lowers the model's context, never raises it.
	out, _, err = runCLI(t, "run", "-q", "--max-model-len", "1000", "--prompt-tokens", "uniform:800,1200", "--output-tokens", "const:10",
		"--prefix-groups", "0", "--requests", "200")
	require.NoError(t, err)
	require.Contains(t, out, `"max_model_len": 1000`)
	n, _ = counts(t, out)
	tooLong := n["rejected_too_long"]
	require.Greater(t, tooLong, int64(50))
	require.Less(t, tooLong, int64(150))
	require.Equal(t, int64(200), tooLong+n["completed"])
	_, _, err = runCLI(t, "run", "-q", "--max-model-len", "200000")
	require.EqualError(t, err, "--max-model-len: 200000 is more than the model's context of 131072 tokens (max_position_embeddings of llama-3.1-8b); vLLM refuses it too")
	_, _, err = runCLI(t, "run", "-q", "--max-model-len", "-1")
	require.ErrorContains(t, err, "--max-model-len: must be >= 0 tokens, got -1")

	// A cluster counts them too, per instance and in all.
	out, diag, err = runCLI(t, "run", "-q", "--model", "gpt2", "--prompt-tokens", "const:5000", "--requests", "50", "--num-instances", "2")
	require.NoError(t, err)
	n, in := counts(t, out)
	require.Equal(t, int64(50), n["rejected_too_long"])
	require.Len(t, in, 2)
	require.Equal(t, int64(50), in[0]["rejected_too_long"]+in[1]["rejected_too_long"])
	require.Contains(t, diag, "warning: 50 requests rejected as vLLM rejects them")

	// Replayed: the first in the file is named by its line.
	path := filepath.Join(t.TempDir(), "w.csv")
	require.NoError(t, os.WriteFile(path, []byte("arrival_us,prompt_tokens,output_tokens\n0,100,5\n10,5000,5\n20,900,200\n"), 0o644))
	out, diag, err = runCLI(t, "run", "-q", "--model", "gpt2", "--replay", path)
	require.NoError(t, err)
	n, _ = counts(t, out)
	require.Equal(t, int64(2), n["rejected_too_long"])
	require.Contains(t, diag, "the first in the --replay file: "+path+":3: prompt_tokens 5000 + output_tokens 5 exceed max_model_len 1024")
	_, _, err = runCLI(t, "run", "-q", "--model", "gpt2", "--replay", path, "--strict")
	require.EqualError(t, err, "--replay: "+path+":3: prompt_tokens 5000 + output_tokens 5 exceed max_model_len 1024, which vLLM refuses")
}

// A requests table whose footer row count reads -1 (one
// footer byte changed) panicked blis run --replay (makeslice: cap out of
// range). It fails naming the file.
func TestReplayOfDamagedParquetFooter(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "replay", "requests.parquet"))
	require.NoError(t, err)
	f, err := pqread.Open(filepath.Join("testdata", "replay", "requests.parquet"))
	require.NoError(t, err)
	rows := f.NumRows()
	f.Close()
	n := len(data)
	flen := int(binary.LittleEndian.Uint32(data[n-8 : n-4]))
	footer := data[n-8-flen : n-8]
	// num_rows (field 3, i64) follows the schema list: header byte 0x16,
	// then the zigzag varint, rewritten as -1 in as many bytes.
	enc := binary.AppendUvarint([]byte{0x16}, uint64(rows)<<1)
	i := bytes.Index(footer, enc)
	require.GreaterOrEqual(t, i, 0)
	bad := bytes.Clone(data)
	v := bad[n-8-flen+i+1 : n-8-flen+i+len(enc)]
	for k := range v {
		v[k] = 0x80
	}
	v[0], v[len(v)-1] = 0x81, 0
	if len(v) == 1 {
		v[0] = 0x01
	}
	path := filepath.Join(t.TempDir(), "requests.parquet")
	require.NoError(t, os.WriteFile(path, bad, 0o644))
	_, _, err = runCLI(t, "run", "-q", "--replay", path)
	require.ErrorContains(t, err, "--replay: "+path+": corrupt Parquet file")
}

// --prompt-tokens const:40 with the default 512-token
// prefixes gave half the requests 513-token prompts while the output said
// const:40 (the log-normal form with a max below the prefix was refused).
// The prompt length includes the prefix for every form: a distribution
// that cannot exceed the prefix is refused, and the run says how many
// grouped samples were raised.
func TestPromptsAndPrefixesFollowOneRule(t *testing.T) {
	for _, dist := range []string{"const:40", "const:512", "uniform:10,500", "exponential:mean=100,max=300", "histogram:1-100=1,300=2", "lognormal:mean=40,cv=0.5,max=100"} {
		_, _, err := runCLI(t, "run", "-q", "--prompt-tokens", dist, "--requests", "10")
		require.ErrorContains(t, err, "--prefix-tokens: 512 must be < the longest prompt of ", dist)
		require.ErrorContains(t, err, "a prompt's length includes its group's prefix", dist)
	}
	// Without prefixes, or with a shorter one, const:40 is const:40.
	for _, args := range [][]string{{"--prefix-groups", "0"}, {"--prefix-tokens", "32"}} {
		out, _, err := runCLI(t, append([]string{"run", "-q", "--prompt-tokens", "const:40", "--requests", "20", "--per-request"}, args...)...)
		require.NoError(t, err, "%v", args)
		for _, r := range parse(t, out).Metrics.PerRequest {
			require.Equal(t, int64(40), r.PromptTokens, "%v", args)
		}
	}
	// The default run raises some grouped samples, and says so.
	_, diag, err := runCLI(t, "run", "--requests", "300")
	require.NoError(t, err)
	require.Regexp(t, `blis: workload: \d+ of the \d+ prompts that start with a shared 512-token prefix were drawn no longer than it and lengthened to 513 tokens`, diag)
}

// Found by FuzzRunCommand: inputs that broke the simulator
// instead of being refused. --admission-latency and --routing-latency
// near 2^63 overflowed the cluster clock into an invariant failure (CL-4,
// "a simulator bug"); --prefix-index-capacity 2^31 wrapped to a negative
// int32 and panicked (index out of range) on the first routed request;
// --horizon beyond 2^63 µs overflowed into a negative horizon, refused as
// "field horizon: must be >= 0, got -9223372036854775808 µs". Each is now
// an error naming the flag or the file's key.
func TestFuzzFoundInputsAreRefused(t *testing.T) {
	dep := filepath.Join(t.TempDir(), "d.yaml")
	require.NoError(t, os.WriteFile(dep, []byte("pools:\n  - replicas: 2\nrouting:\n  latency_us: 1099511627777\n"), 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--num-instances", "2", "--admission-latency", "9223372036854775807"}, "--admission-latency: must be within [0, 1099511627776] µs, got 9223372036854775807"},
		{[]string{"--num-instances", "2", "--routing-latency", "9223372036854775807"}, "--routing-latency: must be within [0, 1099511627776] µs, got 9223372036854775807"},
		{[]string{"--deployment", dep}, "routing.latency_us: must be within [0, 1099511627776] µs"},
		{[]string{"--num-instances", "2", "--routing-policy", "weighted", "--prefix-index-capacity", "2147483648"}, "--prefix-index-capacity: must be within [0, 1073741824] blocks, got 2147483648"},
		{[]string{"--horizon", "1e300"}, "--horizon: must be within [0, 2305843009213] s, got 1e300"},
		{[]string{"--horizon", "9.3e12", "--num-instances", "2"}, "--horizon: must be within [0, 2305843009213] s, got 9.3e12"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"run", "-q", "--requests", "20"}, c.args...)...)
			require.ErrorContains(t, err, c.want)
		})
	}
	// The largest values allowed run.
	_, _, err := runCLI(t, "run", "-q", "--requests", "20", "--num-instances", "2", "--admission-latency", "1099511627776", "--routing-latency", "1099511627776",
		"--routing-policy", "weighted", "--prefix-index-capacity", "1073741824", "--horizon", "2305843009213")
	require.NoError(t, err)
}
