package sim

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The model's context was ignored. A request whose
// prompt and output exceed MaxModelLen is refused as vLLM's API server
// refuses it (HTTP 400), when its input has been processed, without
// waiting for a step boundary, and counted in rejected_too_long; one that
// fits exactly is served.
func TestMaxModelLenRejectsTooLongRequests(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxLen      int64
		reqs        [][3]int64 // arrival, prompt, output
		wantRefused []int64
		want        Counts
	}{
		{"no limit", 0, [][3]int64{{0, 100, 5}, {10, 5000, 5}}, nil,
			Counts{Offered: 2, Injected: 2, Completed: 2}},
		{"prompt + output = max fits", 105, [][3]int64{{0, 100, 5}}, nil,
			Counts{Offered: 1, Injected: 1, Completed: 1}},
		{"one token over", 104, [][3]int64{{0, 100, 5}}, []int64{0},
			Counts{Offered: 1, Injected: 1, RejectedTooLong: 1}},
		{"prompt = max leaves no room for output", 100, [][3]int64{{0, 100, 1}, {5, 99, 1}}, []int64{0},
			Counts{Offered: 2, Injected: 2, Completed: 1, RejectedTooLong: 1}},
		{"rejected while a step runs", 200, [][3]int64{{0, 150, 20}, {500, 150, 60}, {600, 10, 2}}, []int64{1},
			Counts{Offered: 3, Injected: 3, Completed: 2, RejectedTooLong: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Engine.MaxModelLen = tc.maxLen
			rec := &recorder{}
			cfg.Observer = rec
			reqs := specs(tc.reqs...)
			e, err := NewEngine(cfg)
			require.NoError(t, err)
			// Sim.Run's loop, keeping the completions.
			var refused []Completion
			next := 0
			for {
				at, ok := e.NextEventUs()
				for next < len(reqs) && (!ok || reqs[next].ArrivalUs <= at) {
					require.NoError(t, e.Inject(reqs[next], reqs[next].ArrivalUs))
					next++
					at, ok = e.NextEventUs()
				}
				if !ok {
					break
				}
				require.NoError(t, e.Advance())
				for _, c := range e.Completions() {
					if c.TooLong {
						refused = append(refused, c)
					}
				}
			}
			res, err := e.Finish()
			require.NoError(t, err)
			require.Equal(t, tc.want, res.Requests)
			require.Equal(t, tc.wantRefused, rec.dropped, "the observer sees each refusal")
			require.Len(t, refused, len(tc.wantRefused))
			for _, c := range refused {
				require.False(t, c.Dropped)
				require.Contains(t, c.Reason, "exceed max_model_len")
				// Refused when the API overhead (100 µs) ends, even inside a
				// step: the engine core never sees it.
				require.Equal(t, tc.reqs[c.ID][0]+100, c.DepartedUs)
			}
			if len(tc.wantRefused) > 0 {
				first := tc.reqs[tc.wantRefused[0]]
				require.Equal(t, &TooLongRequest{ID: tc.wantRefused[0], PromptTokens: first[1], OutputTokens: first[2], MaxModelLen: tc.maxLen}, res.FirstTooLong)
			} else {
				require.Nil(t, res.FirstTooLong)
			}
		})
	}
}

func TestMaxModelLenValidated(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.MaxModelLen = -1
	_, err := NewEngine(cfg)
	require.ErrorContains(t, err, `"max_model_len": must be >= 0`)
}

// Lengths near 2^63 overflowed prompt + output − 1 and
// panicked in the hash chain's allocation. Lengths above MaxTokens are
// refused before any arithmetic; MaxTokens itself runs (it is dropped as
// unservable, no cache holds it) without overflowing.
func TestTokenLengthsAboveMaxTokensAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name           string
		prompt, output int64
		wantErr        string
	}{
		{"prompt near 2^63", math.MaxInt64 - 10, 5, "prompt_tokens 9223372036854775797 is more than the simulator takes (1125899906842624)"},
		{"both 2^62", 1 << 62, 1 << 62, "prompt_tokens 4611686018427387904 is more than"},
		{"output near 2^63", 10, math.MaxInt64, "output_tokens 9223372036854775807 is more than"},
		{"MaxTokens each", MaxTokens, MaxTokens, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := []RequestSpec{{ID: 0, PromptTokens: tc.prompt, OutputTokens: tc.output}, {ID: 1, ArrivalUs: 10, PromptTokens: 10, OutputTokens: 2}}
			cfg := baseConfig()
			cfg.Engine.TotalKVBlocksGPU = math.MaxInt32
			s, err := New(cfg, reqs)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				e, err := NewEngine(cfg)
				require.NoError(t, err)
				require.ErrorContains(t, e.Inject(reqs[0], 0), tc.wantErr)
				return
			}
			require.NoError(t, err)
			res, err := s.Run()
			require.NoError(t, err)
			require.Equal(t, Counts{Offered: 2, Injected: 2, Completed: 1, Dropped: 1}, res.Requests)
		})
	}
}
