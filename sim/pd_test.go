package sim

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHandoffPrefillKeepsKV: a prefill handoff computes its prompt and one
// token, leaves as handed off (not completed, no client latency), and
// keeps its 7 blocks (100 tokens at 16 a block) until ReleaseKV.
func TestHandoffPrefillKeepsKV(t *testing.T) {
	g := newAbortRig(t, baseConfig())
	g.inject(RequestSpec{ID: 0, PromptTokens: 100, OutputTokens: 1, Handoff: HandoffPrefill}, 0)
	g.until(5000)
	// Queued at 100 (API time), one 1000 µs step: the token at 1100, the
	// response closed 50 µs later.
	c := g.completion(0)
	require.True(t, c.HandedOff)
	require.Equal(t, int64(1100), c.FirstTokenUs)
	require.Equal(t, int64(1150), c.DepartedUs)
	st := g.e.Status()
	require.Equal(t, int64(7), st.TotalKVBlocks-st.FreeKVBlocks, "kept for the decode instance")
	require.Zero(t, st.InFlight)
	require.Error(t, g.e.KVArrived(0, 5000), "not a decode handoff")
	require.Error(t, g.e.ReleaseKV(9, 5000), "unknown")
	require.Error(t, g.e.Retire(), "its KV is still kept")

	require.NoError(t, g.e.ReleaseKV(0, 5000))
	g.until(math.MaxInt64)
	st = g.e.Status()
	require.Equal(t, st.TotalKVBlocks, st.FreeKVBlocks)
	require.Error(t, g.e.ReleaseKV(0, g.e.Now()), "released once")
	res := g.finish()
	require.Equal(t, Counts{Offered: 1, Injected: 1, HandedOff: 1}, res.Requests)
	require.Zero(t, res.Hist.TTFT.Count(), "a handoff's latency is not a client's")
	require.NoError(t, g.e.Retire())
}

// TestHandoffDecodePullsThenDecodes: a decode handoff takes its blocks and
// waits for its KV without running (no step, no seat); once the KV is in,
// its first step recomputes the last prompt token and produces the first
// token; its TTFT counts from the client's send.
func TestHandoffDecodePullsThenDecodes(t *testing.T) {
	g := newAbortRig(t, baseConfig())
	g.inject(RequestSpec{ID: 5, PromptTokens: 100, OutputTokens: 3, Handoff: HandoffDecode}, 0)
	g.through(100)
	require.Equal(t, []Pull{{ID: 5, AtUs: 100, Tokens: 100, Blocks: 7}}, g.e.Pulls(), "not Waited: its blocks were free")
	st := g.e.Status()
	require.Equal(t, int64(1), st.QueueDepth, "waiting for its KV counts as waiting, as in vLLM")
	require.Zero(t, st.BatchSize)
	require.Equal(t, int64(7), st.TotalKVBlocks-st.FreeKVBlocks)
	_, busy := g.e.NextEventUs()
	require.False(t, busy, "no step runs while only a pull waits")

	require.NoError(t, g.e.KVArrived(5, 5000))
	require.Error(t, g.e.KVArrived(5, 5000), "once")
	res := g.finish()
	c := g.completion(5)
	// The step at 5000 computes 1 token (the last prompt token) and gives
	// the first; two decode steps give the others.
	require.Equal(t, int64(6000), c.FirstTokenUs)
	require.Equal(t, int64(8000), c.FinishedUs)
	require.Equal(t, int64(5000), c.FirstScheduledUs)
	require.Equal(t, Counts{Offered: 1, Injected: 1, Completed: 1}, res.Requests)
	require.Equal(t, int64(3), res.Steps)
	require.Equal(t, int64(100), res.RemotePromptTokens)
	require.Equal(t, int64(1), res.Hist.TTFT.Count())
	require.Equal(t, 6.0, res.TTFT.Max, "ms, from the client's send at 0")
}

// TestHandoffDecodeUsesItsPrefixCache: only the tokens past the decode
// instance's cached prefix are pulled.
func TestHandoffDecodeUsesItsPrefixCache(t *testing.T) {
	g := newAbortRig(t, baseConfig())
	// A request of group 1 leaves its 64-token prefix (4 blocks) cached.
	g.inject(RequestSpec{ID: 0, PromptTokens: 80, OutputTokens: 1, PrefixGroup: 1, PrefixTokens: 64}, 0)
	g.until(10_000)
	g.inject(RequestSpec{ID: 1, ArrivalUs: 10_000, PromptTokens: 100, OutputTokens: 2, PrefixGroup: 1, PrefixTokens: 64, Handoff: HandoffDecode}, 10_000)
	g.through(10_100)
	require.Equal(t, []Pull{{ID: 1, AtUs: 10_100, Tokens: 36, Blocks: 3}}, g.e.Pulls())
	require.NoError(t, g.e.KVArrived(1, 12_000))
	res := g.finish()
	require.Equal(t, int64(64), g.completion(1).CachedTokens)
	require.Equal(t, int64(36), res.RemotePromptTokens)
}

// TestHandoffDecodeWaitsForBlocks: without room for its blocks a decode
// handoff waits in the queue (counted as an allocation failure), is
// never dropped, and pulls once blocks are free.
func TestHandoffDecodeWaitsForBlocks(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = 10
	g := newAbortRig(t, cfg)
	// 120 + 9 tokens: 9 blocks at most, for 10 steps.
	g.inject(RequestSpec{ID: 0, PromptTokens: 120, OutputTokens: 10}, 0)
	// 100 tokens need 7 blocks: not there until request 0 leaves.
	g.inject(RequestSpec{ID: 1, ArrivalUs: 500, PromptTokens: 100, OutputTokens: 2, Handoff: HandoffDecode}, 500)
	var pulledAt int64 = -1
	for pulledAt < 0 {
		g.advance()
		if p := g.e.Pulls(); len(p) > 0 {
			pulledAt = p[0].AtUs
			require.True(t, p[0].Waited, "it waited for blocks")
		}
	}
	c0 := g.completion(0)
	require.GreaterOrEqual(t, pulledAt, c0.FinishedUs, "the pull waited for request 0's blocks")
	require.NoError(t, g.e.KVArrived(1, pulledAt+3000))
	res := g.finish()
	require.Equal(t, int64(2), res.Requests.Completed)
	require.Zero(t, res.Requests.Dropped)
	require.Positive(t, res.KVAllocFailures)
}

func TestHandoffSpecIsChecked(t *testing.T) {
	for _, r := range []RequestSpec{
		{ID: 1, PromptTokens: 10, OutputTokens: 2, Handoff: HandoffPrefill},
		{ID: 1, PromptTokens: 10, OutputTokens: 2, Handoff: 9},
	} {
		require.Error(t, r.Validate())
	}
	require.Equal(t, "decode", HandoffDecode.String())
}

// TestAbortDuringPull: a decode handoff whose client gives up while its
// KV is on its way leaves timed out and frees its blocks; a kept prefill
// handoff cannot be aborted (only its KV is left, for ReleaseKV).
func TestAbortDuringPull(t *testing.T) {
	g := newAbortRig(t, baseConfig())
	g.inject(RequestSpec{ID: 1, PromptTokens: 100, OutputTokens: 3, Handoff: HandoffDecode}, 0)
	g.inject(RequestSpec{ID: 2, PromptTokens: 100, OutputTokens: 1, Handoff: HandoffPrefill}, 0)
	g.through(1100)
	require.NoError(t, g.e.KVArrived(1, 9000))
	require.True(t, g.abort(1, 2000), "the pending arrival is cancelled")
	require.True(t, g.completion(1).TimedOut)
	require.False(t, g.abort(2, 2000), "handed off")
	require.NoError(t, g.e.ReleaseKV(2, 3000))
	res := g.finish()
	require.Equal(t, Counts{Offered: 2, Injected: 2, TimedOut: 1, HandedOff: 1}, res.Requests)
	st := g.e.Status()
	require.Equal(t, st.TotalKVBlocks, st.FreeKVBlocks)
}

// TestKVLostIsRecomputed: a decode handoff whose prefill copy is gone
// (KVLost, at 5000 µs) releases its pull's blocks, keeps its cached prefix
// (4 blocks of group 1) and prefills the rest here: one 512-token step can
// take its 36 remaining tokens, which give its first token; it completes,
// counted as a failed load, its prompt computed here (not remote).
func TestKVLostIsRecomputed(t *testing.T) {
	g := newAbortRig(t, baseConfig())
	g.inject(RequestSpec{ID: 0, PromptTokens: 80, OutputTokens: 1, PrefixGroup: 1, PrefixTokens: 64}, 0)
	g.until(10_000)
	g.inject(RequestSpec{ID: 1, ArrivalUs: 10_000, PromptTokens: 100, OutputTokens: 3, PrefixGroup: 1, PrefixTokens: 64, Handoff: HandoffDecode}, 10_000)
	g.through(10_100)
	require.Equal(t, []Pull{{ID: 1, AtUs: 10_100, Tokens: 36, Blocks: 3}}, g.e.Pulls())
	require.NoError(t, g.e.KVLost(1, 15_000))
	require.Error(t, g.e.KVArrived(1, 15_000), "its KV will not come")
	require.Error(t, g.e.KVLost(1, 15_000), "once")
	res := g.finish()
	c := g.completion(1)
	require.False(t, c.HandedOff)
	require.Equal(t, int64(15_000), c.FirstScheduledUs)
	// The prefill step at 15,000 (36 tokens) gives the first token at
	// 16,000; two decode steps the others.
	require.Equal(t, int64(16_000), c.FirstTokenUs)
	require.Equal(t, int64(18_000), c.FinishedUs)
	require.Equal(t, int64(64), c.CachedTokens)
	require.Equal(t, int64(1), res.KVLoadsFailed)
	require.Zero(t, res.RemotePromptTokens)
	require.Equal(t, int64(180), res.PromptTokens, "80 + 100, each counted once")
	require.Equal(t, Counts{Offered: 2, Injected: 2, Completed: 2}, res.Requests)
	st := g.e.Status()
	require.Equal(t, st.TotalKVBlocks, st.FreeKVBlocks)
}

// TestExpiredCopyIsNotActivity: a prefill copy released at its abort
// timeout, long after the request's token, does not stretch the
// instance's interval (EndUs), where a release by a pull does.
func TestExpiredCopyIsNotActivity(t *testing.T) {
	for _, expire := range []bool{false, true} {
		g := newAbortRig(t, baseConfig())
		g.inject(RequestSpec{ID: 0, PromptTokens: 100, OutputTokens: 1, Handoff: HandoffPrefill}, 0)
		g.until(5000)
		release := g.e.ReleaseKV
		if expire {
			release = g.e.ExpireKV
		}
		require.NoError(t, release(0, 480_000_000))
		res := g.finish()
		st := g.e.Status()
		require.Equal(t, st.TotalKVBlocks, st.FreeKVBlocks, "released either way")
		if expire {
			require.Equal(t, int64(1100), res.EndUs, "its step's end")
		} else {
			require.Equal(t, int64(480_000_000), res.EndUs)
		}
	}
}

// TestQueueHeldByKeptKVAtTheEnd: a request that waits for blocks a kept
// prefill copy holds, with nothing running, has no event of its own: the
// copy's release is the caller's (a pull, or the abort timeout). A caller
// that stops there (a horizon) finds it still queued, counted in the
// system, not an INV-1 failure; once the copy is released it is served.
func TestQueueHeldByKeptKVAtTheEnd(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = 10
	for _, release := range []bool{false, true} {
		g := newAbortRig(t, cfg)
		// 100 tokens: 7 blocks kept; request 1's 100 + 1 need 7 more.
		g.inject(RequestSpec{ID: 0, PromptTokens: 100, OutputTokens: 1, Handoff: HandoffPrefill}, 0)
		g.inject(RequestSpec{ID: 1, ArrivalUs: 500, PromptTokens: 100, OutputTokens: 2}, 500)
		g.until(math.MaxInt64)
		_, busy := g.e.NextEventUs()
		require.False(t, busy, "request 1 waits for request 0's copy, with no event")
		if release {
			require.NoError(t, g.e.ReleaseKV(0, 480_000_000))
		}
		res := g.finish()
		if release {
			require.Equal(t, Counts{Offered: 2, Injected: 2, Completed: 1, HandedOff: 1}, res.Requests)
			continue
		}
		require.Equal(t, Counts{Offered: 2, Injected: 2, HandedOff: 1, StillQueued: 1}, res.Requests)
	}
}

// TestReleasedIDCanComeBack: once ReleaseKV is called, a kept copy's id is
// free for a new request (a client's retry of a request whose decode part
// a draining instance handed back: its copy is released, and its prefill
// may come back here) even before the release is processed; each
// request's release finds its own slot.
func TestReleasedIDCanComeBack(t *testing.T) {
	for _, expire := range []bool{false, true} {
		g := newAbortRig(t, baseConfig())
		g.inject(RequestSpec{ID: 0, PromptTokens: 100, OutputTokens: 1, Handoff: HandoffPrefill}, 0)
		g.until(5000)
		release := g.e.ReleaseKV
		if expire {
			release = g.e.ExpireKV
		}
		require.NoError(t, release(0, 5000))
		g.inject(RequestSpec{ID: 0, ArrivalUs: 5000, PromptTokens: 100, OutputTokens: 1, Handoff: HandoffPrefill}, 5000)
		g.until(10_000)
		require.True(t, g.done[len(g.done)-1].HandedOff)
		require.NoError(t, g.e.ReleaseKV(0, 10_000))
		res := g.finish()
		require.Equal(t, Counts{Offered: 2, Injected: 2, HandedOff: 2}, res.Requests)
		st := g.e.Status()
		require.Equal(t, st.TotalKVBlocks, st.FreeKVBlocks)
	}
}

// TestLoneRequestPreemptedBehindPulledKV: a decode instance of 10 blocks
// and one seat; request 0 (40 + 30 tokens) runs in 3 blocks, decode
// handoff 1 took the other 7 for its pull, and its KV is in (queued at
// the head, no seat for it). At 9,100 µs request 0 needs a fourth block:
// none is free, and it preempts itself. Nothing runs then; the step used
// to return without a next one, and the engine stopped with both queued
// forever. vLLM's engine loop schedules again at once: request 0, at the
// head, cannot have its 4 blocks back while 1 holds 7, so the handoff is
// admitted from behind it (rescuePulled), completes, and request 0 then
// runs to its end.
func TestLoneRequestPreemptedBehindPulledKV(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = 10
	cfg.Engine.MaxNumSeqs = 1
	g := newAbortRig(t, cfg)
	g.inject(RequestSpec{ID: 1, PromptTokens: 100, OutputTokens: 2, Handoff: HandoffDecode}, 0)
	g.inject(RequestSpec{ID: 0, PromptTokens: 40, OutputTokens: 30}, 0)
	g.through(100)
	require.Equal(t, []Pull{{ID: 1, AtUs: 100, Tokens: 100, Blocks: 7}}, g.e.Pulls())
	require.NoError(t, g.e.KVArrived(1, 5000))
	res := g.finish()
	require.Equal(t, Counts{Offered: 2, Injected: 2, Completed: 2}, res.Requests)
	require.Equal(t, int64(1), g.completion(0).Preemptions)
	require.Less(t, g.completion(1).FinishedUs, g.completion(0).FinishedUs, "the handoff went first")
}
