package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

func baseSpec() Spec {
	return Spec{
		Requests: 200,
		Rate:     10,
		Arrival:  ArrivalPoisson,
		Prompt:   Dist{Kind: KindLognormal, Mean: 512, CV: 0.5},
		Output:   Dist{Kind: KindExponential, Mean: 128},
	}
}

func seeded(seed uint64) *rand.Rand { return sim.NewRNG(int64(seed)).Stream(sim.StreamWorkload) }

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Spec)
		want string
	}{
		{"ok", func(*Spec) {}, ""},
		{"empty arrival is poisson", func(s *Spec) { s.Arrival = "" }, ""},
		{"requests", func(s *Spec) { s.Requests = 0 }, "requests must be > 0, got 0"},
		{"rate", func(s *Spec) { s.Rate = -2 }, "rate must be > 0 and finite, got -2"},
		{"rate nan", func(s *Spec) { s.Rate = math.NaN() }, "rate must be > 0"},
		{"rate inf", func(s *Spec) { s.Rate = math.Inf(1) }, "rate must be > 0 and finite"},
		{"arrival", func(s *Spec) { s.Arrival = "uniform" }, `arrival must be "poisson" or "gamma", got "uniform"`},
		{"gamma cv", func(s *Spec) { s.Arrival = ArrivalGamma }, "gamma-cv must be within [0.001, 1000], got 0"},
		{"prompt", func(s *Spec) { s.Prompt = Dist{} }, "prompt-tokens: distribution kind is empty"},
		{"output", func(s *Spec) { s.Output.Mean = 0 }, "output-tokens: exponential: mean must be > 0, got 0"},
		{"prefix groups", func(s *Spec) { s.PrefixGroups = -1 }, "prefix-groups must be within [0, 2147483647], got -1"},
		{"prefix fraction", func(s *Spec) { s.PrefixFraction = 1.5 }, "prefix-fraction must be within [0, 1], got 1.5"},
		{"prefix tokens ignored without groups", func(s *Spec) { s.PrefixTokens, s.PrefixFraction = 64, 0.5 }, ""},
		{"negative prefix tokens", func(s *Spec) { s.PrefixTokens = -1 }, "prefix-tokens must be within [0, 1125899906842624), got -1"},
		{"groups without prefix tokens", func(s *Spec) { s.PrefixGroups = 3 }, "prefix-tokens must be > 0 when prefix-groups is 3"},
		{"prefix reaches prompt max", func(s *Spec) {
			s.PrefixGroups, s.PrefixTokens, s.Prompt.Max = 2, 1024, 1024
		}, "prefix-tokens 1024 must be < the longest prompt of lognormal:mean=512,cv=0.5,max=1024 (1024): a prompt's length includes its group's prefix"},
		// Every kind follows the rule the lognormal's
		// max did (const:40 made half the prompts 513 tokens).
		{"const at most the prefix", func(s *Spec) {
			s.PrefixGroups, s.PrefixTokens, s.Prompt = 8, 512, Dist{Kind: KindConst, Mean: 40}
		}, "prefix-tokens 512 must be < the longest prompt of const:40 (40)"},
		{"const equal to the prefix", func(s *Spec) {
			s.PrefixGroups, s.PrefixTokens, s.Prompt = 8, 512, Dist{Kind: KindConst, Mean: 512}
		}, "prefix-tokens 512 must be < the longest prompt of const:512 (512)"},
		{"const above the prefix", func(s *Spec) {
			s.PrefixGroups, s.PrefixTokens, s.Prompt = 8, 512, Dist{Kind: KindConst, Mean: 513}
		}, ""},
		{"uniform below the prefix", func(s *Spec) {
			s.PrefixGroups, s.PrefixTokens, s.Prompt = 8, 512, Dist{Kind: KindUniform, Lo: 10, Hi: 500}
		}, "prefix-tokens 512 must be < the longest prompt of uniform:10,500 (500)"},
		{"uniform clamped below the prefix", func(s *Spec) {
			s.PrefixGroups, s.PrefixTokens, s.Prompt = 8, 512, Dist{Kind: KindUniform, Lo: 10, Hi: 5000, Max: 400}
		}, "prefix-tokens 512 must be < the longest prompt of uniform:10,5000,max=400 (400)"},
		{"uniform reaching past the prefix", func(s *Spec) {
			s.PrefixGroups, s.PrefixTokens, s.Prompt = 8, 512, Dist{Kind: KindUniform, Lo: 10, Hi: 600}
		}, ""},
		{"histogram below the prefix", func(s *Spec) {
			s.PrefixGroups, s.PrefixTokens = 8, 512
			s.Prompt = Dist{Kind: KindHistogram, Bins: []Bin{{Lo: 1, Hi: 100, W: 1, Cum: 0.5}, {Lo: 200, Hi: 300, W: 1, Cum: 1}, {Lo: 900, Hi: 900, W: 0, Cum: 1}}}
		}, "prefix-tokens 512 must be < the longest prompt of histogram:1-100=1,200-300=1,900=0 (300)"},
		{"exponential with a max below the prefix", func(s *Spec) {
			s.PrefixGroups, s.PrefixTokens, s.Prompt = 8, 512, Dist{Kind: KindExponential, Mean: 100, Max: 300}
		}, "prefix-tokens 512 must be < the longest prompt of exponential:mean=100,max=300 (300)"},
		{"normal unbounded", func(s *Spec) {
			s.PrefixGroups, s.PrefixTokens, s.Prompt = 8, 512, Dist{Kind: KindNormal, Mean: 40, CV: 0.1}
		}, ""},
		{"start", func(s *Spec) { s.StartUs = -1 }, "start-us must be >= 0, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := baseSpec()
			tt.mod(&s)
			err := s.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
			_, genErr := Generate(s, seeded(1))
			require.Equal(t, err, genErr, "Generate validates first")
		})
	}
}

func TestGenerateDeterministic(t *testing.T) {
	s := baseSpec()
	s.Arrival, s.GammaCV = ArrivalGamma, 2
	s.PrefixGroups, s.PrefixTokens, s.PrefixFraction = 4, 256, 0.5
	a, err := Generate(s, seeded(7))
	require.NoError(t, err)
	b, err := Generate(s, seeded(7))
	require.NoError(t, err)
	require.Equal(t, a, b)
	require.NoError(t, sim.ValidateWorkload(a))
	c, err := Generate(s, seeded(8))
	require.NoError(t, err)
	require.NotEqual(t, a, c)
}

// TestGenerateGolden pins the first requests of a seed, so a change of draw
// order (which would silently change every experiment) fails loudly.
func TestGenerateGolden(t *testing.T) {
	s := baseSpec()
	s.Requests = 3
	s.StartUs = 1000
	s.PrefixGroups, s.PrefixTokens, s.PrefixFraction = 2, 600, 0.5
	got, err := Generate(s, seeded(1))
	require.NoError(t, err)
	require.Equal(t, []sim.RequestSpec{
		{ID: 0, ArrivalUs: 133038, PromptTokens: 719, OutputTokens: 128, PrefixGroup: 1, PrefixTokens: 600},
		{ID: 1, ArrivalUs: 352496, PromptTokens: 822, OutputTokens: 391, PrefixGroup: 2, PrefixTokens: 600},
		{ID: 2, ArrivalUs: 358496, PromptTokens: 362, OutputTokens: 102},
	}, got)
}

func gaps(reqs []sim.RequestSpec, startUs int64) []float64 {
	out := make([]float64, len(reqs))
	prev := startUs
	for i, r := range reqs {
		out[i] = float64(r.ArrivalUs - prev)
		prev = r.ArrivalUs
	}
	return out
}

func TestArrivalStatistics(t *testing.T) {
	const rate = 20.0
	tests := []struct {
		arrival       string
		gammaCV       float64
		meanTol       float64 // about 4 standard errors: cv/sqrt(n)
		wantCV, cvTol float64
	}{
		{ArrivalPoisson, 0, 0.03, 1, 0.05},
		{ArrivalGamma, 1, 0.03, 1, 0.05},
		{ArrivalGamma, 2, 0.06, 2, 0.10},
		{ArrivalGamma, 0.5, 0.03, 0.5, 0.05},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s cv %g", tt.arrival, tt.gammaCV), func(t *testing.T) {
			s := baseSpec()
			s.Requests, s.Rate, s.Arrival, s.GammaCV = 20000, rate, tt.arrival, tt.gammaCV
			s.StartUs = 5_000_000
			reqs, err := Generate(s, seeded(3))
			require.NoError(t, err)
			require.NoError(t, sim.ValidateWorkload(reqs))
			require.Greater(t, reqs[0].ArrivalUs, s.StartUs, "the first request arrives one gap after start")
			mean, cv := meanCV(gaps(reqs, s.StartUs))
			require.InEpsilon(t, 1e6/rate, mean, tt.meanTol, "mean gap")
			require.InEpsilon(t, tt.wantCV, cv, tt.cvTol, "gap cv")
		})
	}
}

func TestGammaSampleSmallShape(t *testing.T) {
	// k = 0.25 exercises the k < 1 boost: Gamma(k, 1) has mean k, CV 1/sqrt(k).
	r := rand.New(rand.NewPCG(5, 6))
	xs := make([]float64, 50000)
	for i := range xs {
		xs[i] = gammaSample(r, 0.25)
	}
	mean, cv := meanCV(xs)
	require.InEpsilon(t, 0.25, mean, 0.05)
	require.InEpsilon(t, 2.0, cv, 0.08)
}

func TestPrefixDoesNotShiftOtherValues(t *testing.T) {
	plain := baseSpec()
	plain.Requests = 2000
	withPrefix := plain
	withPrefix.PrefixGroups, withPrefix.PrefixTokens, withPrefix.PrefixFraction = 5, 400, 0.6
	otherPrompt := plain
	otherPrompt.Prompt = Dist{Kind: KindNormal, Mean: 100, CV: 0.9}
	gamma := plain
	gamma.Arrival, gamma.GammaCV = ArrivalGamma, 3

	a, err := Generate(plain, seeded(11))
	require.NoError(t, err)
	b, err := Generate(withPrefix, seeded(11))
	require.NoError(t, err)
	c, err := Generate(otherPrompt, seeded(11))
	require.NoError(t, err)
	d, err := Generate(gamma, seeded(11))
	require.NoError(t, err)

	members := 0
	for i := range a {
		require.Equal(t, a[i].ArrivalUs, b[i].ArrivalUs)
		require.Equal(t, a[i].OutputTokens, b[i].OutputTokens)
		if b[i].PrefixGroup == 0 {
			require.Equal(t, a[i].PromptTokens, b[i].PromptTokens, "non-members keep their prompt")
		} else {
			members++
			require.Equal(t, max(a[i].PromptTokens, 401), b[i].PromptTokens, "members keep their prompt unless raised")
		}
		// Changing one distribution leaves the others alone.
		require.Equal(t, a[i].ArrivalUs, c[i].ArrivalUs)
		require.Equal(t, a[i].OutputTokens, c[i].OutputTokens)
		require.Equal(t, a[i].PromptTokens, d[i].PromptTokens)
		require.Equal(t, a[i].OutputTokens, d[i].OutputTokens)
	}
	require.InDelta(t, 0.6, float64(members)/float64(len(a)), 0.05)
}

func TestPrefixGroups(t *testing.T) {
	// The sampled prompt is the total, prefix included; members whose
	// sample is no longer than the prefix are raised to prefix+1 so each
	// has a token of its own. A distribution that cannot give a prompt
	// longer than the prefix is refused (TestSpecValidate).
	s := baseSpec()
	s.Requests, s.Prompt = 3000, Dist{Kind: KindUniform, Lo: 50, Hi: 300}
	s.PrefixGroups, s.PrefixTokens, s.PrefixFraction = 3, 100, 1
	reqs, err := Generate(s, seeded(2))
	require.NoError(t, err)
	require.NoError(t, sim.ValidateWorkload(reqs))
	// The same samples without groups (prefix settings never move them).
	s0 := s
	s0.PrefixGroups = 0
	plain, err := Generate(s0, seeded(2))
	require.NoError(t, err)
	counts := make([]int, s.PrefixGroups+1)
	raised := 0
	for i, r := range reqs {
		require.Equal(t, int64(100), r.PrefixTokens)
		if sampled := plain[i].PromptTokens; sampled <= 100 {
			require.Equal(t, int64(101), r.PromptTokens)
			raised++
		} else {
			require.Equal(t, sampled, r.PromptTokens)
		}
		counts[r.PrefixGroup]++
	}
	require.InDelta(t, 3000*51.0/251, raised, 100, "samples 50..100 of 50..300 are raised")
	require.Zero(t, counts[0], "fraction 1: every request is a member")
	for g := 1; g <= s.PrefixGroups; g++ {
		require.InDelta(t, 1000, counts[g], 100, "group %d is picked uniformly", g)
	}
	// The generator counts them, for the run's diagnostics.
	g, err := NewGenerator(s, seeded(2))
	require.NoError(t, err)
	st := NewStream(g)
	for range 1000 {
		st.Next()
	}
	r, n := st.Raised()
	require.Equal(t, int64(1000), n)
	want := 0
	for _, q := range plain[:1000] {
		if q.PromptTokens <= 100 {
			want++
		}
	}
	require.Equal(t, int64(want), r)
}

func TestGenerateIDsAndOverflow(t *testing.T) {
	s := baseSpec()
	reqs, err := Generate(s, seeded(9))
	require.NoError(t, err)
	for i, r := range reqs {
		require.Equal(t, int64(i), r.ID)
		require.Zero(t, r.PrefixGroup)
		require.Zero(t, r.PrefixTokens)
	}
	s.Rate, s.StartUs = 1e-12, math.MaxInt64-10
	_, err = Generate(s, seeded(9))
	require.ErrorContains(t, err, "request 0: an arrival time is beyond the clock's range")
	require.ErrorIs(t, err, ErrArrivalOverflow)

	// Arrivals past the clock's range (2^61 µs) but within int64's were
	// let through: 1,000 requests/s at a rate_scale of 1e-15 put the
	// second one at 4.4e18 µs, and the cluster ran its clock there.
	s = baseSpec()
	s.Rate = 1e-12
	g, err := NewGenerator(s, seeded(9))
	require.NoError(t, err)
	for {
		r, err := g.Next()
		if err != nil {
			require.ErrorIs(t, err, ErrArrivalOverflow)
			break
		}
		require.LessOrEqual(t, r.ArrivalUs, sim.MaxTimeUs)
	}
}

// blis run --requests 9999999999999 panicked in
// Generate ("makeslice: len out of range"), which sized its slice from the
// count. It now grows with the requests made, and Stream, which blis run
// uses, holds one request at a time.
func TestHugeRequestCountsAreNotPreallocated(t *testing.T) {
	s := baseSpec()
	s.Requests = 9_999_999_999_999
	s.Rate, s.StartUs = 1e-12, math.MaxInt64-10 // the first arrival overflows
	_, err := Generate(s, seeded(9))
	require.ErrorContains(t, err, "request 0: an arrival time is beyond the clock's range")
	require.ErrorIs(t, err, ErrArrivalOverflow)

	s = baseSpec()
	s.Requests = 9_999_999_999_999
	g, err := NewGenerator(s, seeded(9))
	require.NoError(t, err)
	st := NewStream(g)
	want, err := Generate(baseSpec(), seeded(9))
	require.NoError(t, err)
	for i := range want {
		at, ok := st.Peek()
		require.True(t, ok)
		r := st.Next()
		require.Equal(t, at, r.ArrivalUs)
		require.Equal(t, want[i], r, "the stream is Generate's sequence")
	}
	require.Equal(t, int64(s.Requests-len(want)), st.Remaining())
	require.NoError(t, st.Err())
}
