package sim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/physics"
)

// TestLockstepMisuseIsAnError: every way of driving a lockstep engine
// wrong returns an error naming what was wrong, and the plan survives a
// refused commit.
func TestLockstepMisuseIsAnError(t *testing.T) {
	cfg := baseConfig()
	alone, err := NewEngine(cfg)
	require.NoError(t, err)
	require.ErrorContains(t, alone.CommitStep(0, 10), "not in lockstep")
	_, planned := alone.PlannedStepUs()
	require.False(t, planned)
	require.Zero(t, alone.DummyStepUs())

	e, err := NewEngine(cfg)
	require.NoError(t, err)
	require.NoError(t, e.SetLockstep())
	require.True(t, e.InLockstep())
	require.Equal(t, int64(1000), e.DummyStepUs(), "the constant model's step")
	require.NoError(t, e.Inject(RequestSpec{ID: 1, PromptTokens: 100, OutputTokens: 2}, 0))
	require.ErrorContains(t, e.SetLockstep(), "after the engine received a request")
	for {
		at, ok := e.NextEventUs()
		require.True(t, ok, "the engine plans a step once the request is queued")
		require.NoError(t, e.Advance())
		if _, planned := e.PlannedStepUs(); planned {
			require.Equal(t, int64(100), at, "queued after the arrival overhead")
			break
		}
	}
	_, more := e.NextEventUs()
	require.False(t, more, "a planned step waits for its commit, nothing else is due")
	require.ErrorContains(t, e.CommitStep(100, 999), "the plan is a step of 1000 µs at 100 µs")
	require.ErrorContains(t, e.CommitStep(101, 1000), "the plan is a step of 1000 µs at 100 µs")
	require.ErrorContains(t, e.CommitStep(100, 0), "outside [1,")
	dt, planned := e.PlannedStepUs()
	require.True(t, planned)
	require.NoError(t, e.CommitStep(100, dt+500))
	at, ok := e.NextEventUs()
	require.True(t, ok)
	require.Equal(t, int64(1600), at, "the next step starts at the group's end")
	require.ErrorContains(t, e.CommitStep(1500, 100), "overlaps")
}

// tokenModel is a step of 1,000 µs plus 10 µs per scheduled token that
// prices a data-parallel group's shape as padding does: the token term at
// the group's largest batch.
type tokenModel struct{ constModel }

func (m tokenModel) StepTimeUs(b *Batch) int64 { return 1000 + 10*b.Beta.ScheduledTokens }
func (m tokenModel) GroupStepDeltaUs(b *Batch, g GroupShape) int64 {
	return 10 * (g.MaxTokens - b.Beta.ScheduledTokens)
}

// TestGroupStepUsPricesTheGroupsShape: a member's part of its group's
// step is its plan (or its dummy batch) moved by the latency model's
// GroupPricer, through a noise wrapper; a plan is not committed over less
// than its part; a model that does not price groups keeps its plan.
func TestGroupStepUsPricesTheGroupsShape(t *testing.T) {
	cfg := baseConfig()
	cfg.Latency = NewNoisy(tokenModel{constModel{arrive: 100}}, 0, rand.New(rand.NewPCG(1, 2)))
	e, err := NewEngine(cfg)
	require.NoError(t, err)
	require.Zero(t, e.GroupTokens(), "not in lockstep")
	require.NoError(t, e.SetLockstep())
	require.Equal(t, int64(1010), e.DummyStepUs())
	require.Equal(t, int64(1), e.GroupTokens(), "idle: the dummy batch's one token")
	var g GroupShape
	g.Add(1)
	g.Add(300)
	require.Equal(t, GroupShape{Members: 2, MaxTokens: 300, SumTokens: 301}, g)
	require.Equal(t, int64(1010+10*299), e.GroupStepUs(g), "the dummy batch padded to the largest member's 300 tokens")

	require.NoError(t, e.Inject(RequestSpec{ID: 1, PromptTokens: 100, OutputTokens: 2}, 0))
	for {
		_, ok := e.NextEventUs()
		require.True(t, ok)
		require.NoError(t, e.Advance())
		if _, planned := e.PlannedStepUs(); planned {
			break
		}
	}
	require.Equal(t, int64(100), e.GroupTokens())
	g = GroupShape{}
	g.Add(100)
	g.Add(300)
	require.Equal(t, int64(2000+10*200), e.GroupStepUs(g))
	require.ErrorContains(t, e.CommitStep(100, 3999), "the plan is a step of 4000 µs")
	require.NoError(t, e.CommitStep(100, 4000))

	plain := baseConfig()
	f, err := NewEngine(plain)
	require.NoError(t, err)
	require.NoError(t, f.SetLockstep())
	require.Equal(t, int64(1000), f.GroupStepUs(g), "constModel prices no group: its own step")
}

// TestRooflineGroupShapeSimplifications pins what GroupStepDeltaUs models
// and what it leaves out, on Qwen3-30B-A3B with DP 2 and expert
// parallelism on RTX PRO 6000s.
func TestRooflineGroupShapeSimplifications(t *testing.T) {
	m, err := physics.LoadModel("qwen3-30b-a3b-instruct-2507")
	require.NoError(t, err)
	h, err := physics.LoadHardware("rtx-pro-6000")
	require.NoError(t, err)
	k := physics.DefaultVLLMKnobs()
	k.MaxNumSeqs, k.MaxBatchedTokens = 128, 2048
	roofline := func(par physics.Parallel) *Roofline {
		cfg, err := physics.NewParallelConfig(m, h, par, k)
		require.NoError(t, err)
		return DefaultRoofline(cfg)
	}
	ep := roofline(physics.Parallel{TP: 1, DP: 2, ExpertParallel: true})
	decodes := func(n, context int64) *Batch {
		var b Batch
		for range n {
			b.Beta.AddDecode(context, context/16+1)
		}
		return &b
	}
	var prefill Batch
	prefill.Beta.AddPrefill(0, 1948)
	for range 100 {
		prefill.Beta.AddDecode(500, 32)
	}
	short, long := decodes(100, 200), decodes(100, 3000)
	var g GroupShape
	g.Add(prefill.Beta.ScheduledTokens)
	g.Add(100)

	// The largest member is priced as alone: it pads nothing, and alone it
	// already assumes every rank has as many tokens.
	require.Zero(t, ep.GroupStepDeltaUs(&prefill, g))
	// A smaller member pads to the largest: its step grows.
	require.Positive(t, ep.GroupStepDeltaUs(short, g))
	// Padded rows skip attention and the LM head: two members with the same
	// tokens and requests but different contexts differ at the group's
	// shape by what they differ alone (their attention), to the µs.
	alone := ep.StepTimeUs(long) - ep.StepTimeUs(short)
	padded := ep.StepTimeUs(long) + ep.GroupStepDeltaUs(long, g) - ep.StepTimeUs(short) - ep.GroupStepDeltaUs(short, g)
	require.Positive(t, alone)
	require.InDelta(t, alone, padded, 1)

	// Eager mode pads nothing: the MoE layers see the members' sum, so the
	// largest member's step shrinks (alone it assumed 2 × 2,048 tokens) and
	// a smaller one's grows.
	eager := roofline(physics.Parallel{TP: 1, DP: 2, ExpertParallel: true})
	eager.DPPadding = false
	require.Negative(t, eager.GroupStepDeltaUs(&prefill, g))
	require.Positive(t, eager.GroupStepDeltaUs(short, g))

	// Without expert parallelism the MoE layers see this rank's rows only:
	// eager, nothing changes; padded, a smaller member is priced at the
	// largest's token count.
	dp := roofline(physics.Parallel{TP: 1, DP: 2})
	dp.DPPadding = false
	require.Zero(t, dp.GroupStepDeltaUs(short, g))
	dp.DPPadding = true
	require.Positive(t, dp.GroupStepDeltaUs(short, g))
	require.Zero(t, dp.GroupStepDeltaUs(&prefill, g))

	// An empty shape or batch moves nothing.
	require.Zero(t, ep.GroupStepDeltaUs(short, GroupShape{}))
	require.Zero(t, ep.GroupStepDeltaUs(&Batch{}, g))

	// An absurd shape saturates instead of wrapping, and an engine's part
	// is clamped to the longest step there is.
	huge := GroupShape{Members: 2, MaxTokens: 1 << 62, SumTokens: 1<<62 + 100}
	require.Equal(t, int64(math.MaxInt64), ep.GroupStepDeltaUs(short, huge))
	eager.DPPadding = false
	require.Equal(t, int64(math.MaxInt64), eager.GroupStepDeltaUs(short, huge))
	cfg := baseConfig()
	cfg.Latency = ep
	e, err := NewEngine(cfg)
	require.NoError(t, err)
	require.NoError(t, e.SetLockstep())
	require.Equal(t, int64(MaxDurationUs), e.GroupStepUs(huge))
}
