package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeStore is a shared store whose content the test sets: it records the
// puts and reads an engine hands it.
type fakeStore struct {
	has   map[uint64]bool
	puts  []fakePut
	reads []uint64
}

type fakePut struct {
	h  uint64
	at int64
}

func (f *fakeStore) Has(h uint64) bool      { return f.has[h] }
func (f *fakeStore) Put(h uint64, at int64) { f.puts = append(f.puts, fakePut{h, at}) }
func (f *fakeStore) Read(h uint64, _ int64) { f.reads = append(f.reads, h) }
func (f *fakeStore) Detached() StoreKV      { return &fakeStore{has: f.has} }

// serve injects reqs into e at their arrivals and advances it until it is
// idle; it returns the completions and the result.
func serve(t *testing.T, e *Engine, reqs []RequestSpec) ([]Completion, *Result) {
	t.Helper()
	for _, r := range reqs {
		require.NoError(t, e.Inject(r, r.ArrivalUs))
	}
	var done []Completion
	for {
		if _, ok := e.NextEventUs(); !ok {
			break
		}
		require.NoError(t, e.Advance())
		done = append(done, e.Completions()...)
	}
	res, err := e.Finish()
	require.NoError(t, err)
	return done, res
}

func hashes(spec RequestSpec, n int64) []uint64 { return AppendBlockHashes(nil, &spec, 16, n) }

// A store hit is loaded within the step: a second turn of a session
// whose first turn another instance served finds its 4 blocks in the
// store, loads them in the step (latency 500 µs + 4 MB at 1 GB/s =
// 4,500 µs on top of the 1,000 µs step), and puts the 2 blocks it fills
// that the store lacks, one after the other over its link once the step
// ends (500 µs each at 2 GB/s, then the 500 µs latency).
func TestStoreHitsLoadInTheStep(t *testing.T) {
	cfg := baseConfig() // steps of 1,000 µs, arrival overhead 100 µs
	cfg.Engine.Tiers = KVTiers{BlockBytes: 1_000_000, Store: StoreLink{GetBytesPerS: 1e9, PutBytesPerS: 2e9, LatencyUs: 500}}
	first := RequestSpec{ID: 1, PromptTokens: 64, OutputTokens: 1, Session: 7}  // 4 blocks
	second := RequestSpec{ID: 2, PromptTokens: 96, OutputTokens: 1, Session: 7} // 6 blocks, its first 4 the first turn's
	h := hashes(second, 6)
	require.Equal(t, hashes(first, 4), h[:4])

	// The first turn, alone: it computes its 4 blocks in the step
	// [100, 1100) and puts them, their link free from 1,100 µs.
	st := &fakeStore{has: map[uint64]bool{}}
	e, err := NewEngine(cfg)
	require.NoError(t, err)
	require.NoError(t, e.AttachStore(st))
	_, res := serve(t, e, []RequestSpec{first})
	require.Equal(t, []fakePut{{h[0], 2100}, {h[1], 2600}, {h[2], 3100}, {h[3], 3600}}, st.puts)
	require.Equal(t, &TierResult{StoredBlocks: 4}, res.KVTiers.Store)

	// The second turn on another instance, the store holding the first's.
	st = &fakeStore{has: map[uint64]bool{h[0]: true, h[1]: true, h[2]: true, h[3]: true}}
	e, err = NewEngine(cfg)
	require.NoError(t, err)
	require.NoError(t, e.AttachStore(st))
	done, res := serve(t, e, []RequestSpec{second})
	require.Equal(t, int64(100+1000+4500), done[0].FirstTokenUs)
	require.Equal(t, []uint64{h[0], h[1], h[2], h[3]}, st.reads)
	// Its step ends at 5,600 µs: the two puts then.
	require.Equal(t, []fakePut{{h[4], 6600}, {h[5], 7100}}, st.puts)
	kt := res.KVTiers
	require.Equal(t, int64(96), kt.PromptTokens)
	require.Equal(t, TierResult{}, kt.GPU)
	require.Equal(t, &TierResult{HitTokens: 64, HitRate: 64.0 / 96, LoadedBlocks: 4, LoadUs: 4500, StoredBlocks: 2}, kt.Store)
	require.InDelta(t, 32.0/96, kt.ComputedRate, 1e-15)
	require.Nil(t, kt.CPU)
	require.Nil(t, kt.Disk)
	// The loaded blocks are registered on the GPU, as computed ones are.
	require.Equal(t, int64(6), e.kv.match(h))
}

// The disk sits behind the CPU tier: what the CPU tier evicts is written
// to it, one block after the other at its write rate, readable after its
// latency; a prefix found partly on the CPU and partly on the disk loads
// the CPU's blocks over PCIe and the disk's in the step.
func TestDiskTakesWhatTheCPUTierEvicts(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = 8
	cfg.Engine.TotalKVBlocksCPU, cfg.Engine.CPUOffloading, cfg.Engine.OffloadThreshold = 2, true, 0 // every eviction stored
	cfg.Engine.Tiers = KVTiers{BlockBytes: 1_000_000, Disk: DiskTier{Blocks: 10, ReadBytesPerS: 1e9, WriteBytesPerS: 1e9, LatencyUs: 100}}
	a := RequestSpec{ID: 1, PromptTokens: 80, OutputTokens: 1, PrefixGroup: 1, PrefixTokens: 64} // 4 shared blocks, 1 own
	c := RequestSpec{ID: 2, ArrivalUs: 2000, PromptTokens: 128, OutputTokens: 1}                 // 8 blocks: evicts a's
	b := RequestSpec{ID: 3, ArrivalUs: 10_000, PromptTokens: 80, OutputTokens: 1, PrefixGroup: 1, PrefixTokens: 64}
	h := hashes(a, 4)
	e, err := NewEngine(cfg)
	require.NoError(t, err)
	done, res := serve(t, e, []RequestSpec{a, c, b})

	// c's admission at 2,100 µs takes a's blocks, freed last block first:
	// a's own block 4, then h3, h2, h1, h0 go to the CPU tier (2 blocks),
	// which passes its oldest to the disk: a's own block, h3, h2, written
	// at 1,000 µs each from 2,100 µs (readable 100 µs after each write).
	// At b's admission (10,100 µs) h0 and h1 are on the CPU, h2 and h3 on
	// the disk: 2 blocks over PCIe, and 100 + 2,000 µs from the disk.
	require.Equal(t, int64(10_100+1000+2100), done[2].FirstTokenUs)
	kt := res.KVTiers
	require.Equal(t, int64(80+128+80), kt.PromptTokens)
	require.Equal(t, int64(0), kt.GPU.HitTokens)
	require.Equal(t, int64(32), kt.CPU.HitTokens)
	// Then b's own allocation evicts c's blocks into the CPU tier, which
	// passes 5 more to the disk: 8 written in all.
	require.Equal(t, &TierResult{HitTokens: 32, HitRate: 32.0 / 288, LoadedBlocks: 2, LoadUs: 2100, StoredBlocks: 8}, kt.Disk)
	require.Equal(t, &KVOffload{StoredBlocks: 10, ReloadedBlocks: 2, CPUEvictions: 8}, res.KVOffload)
	require.InDelta(t, (288-64)/288.0, kt.ComputedRate, 1e-15)
	// h2 and h3, loaded from the disk, are registered on the GPU; h0 and
	// h1, reloaded from the CPU tier, are not (the CPU tier's rule).
	require.Equal(t, int64(0), e.kv.match(h))
	require.Equal(t, int64(2), e.kv.match(h[2:]))
}

// KV block events report every shared block entering and leaving the GPU
// and the CPU tier, in order, and no request's own blocks.
func TestKVBlockEventsFollowTheSharedBlocks(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = 8
	cfg.Engine.TotalKVBlocksCPU, cfg.Engine.CPUOffloading, cfg.Engine.OffloadThreshold = 2, true, 0
	a := RequestSpec{ID: 1, PromptTokens: 80, OutputTokens: 1, PrefixGroup: 1, PrefixTokens: 64}
	c := RequestSpec{ID: 2, ArrivalUs: 2000, PromptTokens: 128, OutputTokens: 1}
	h := hashes(a, 4)
	e, err := NewEngine(cfg)
	require.NoError(t, err)
	e.WatchKVBlocks()
	serve(t, e, []RequestSpec{a, c})
	ev := func(h uint64, t Tier, removed bool) KVBlockEvent {
		return KVBlockEvent{Hash: h, Tier: t, Removed: removed}
	}
	require.Equal(t, []KVBlockEvent{
		ev(h[0], TierGPU, false), ev(h[1], TierGPU, false), ev(h[2], TierGPU, false), ev(h[3], TierGPU, false),
		// c's allocation: a's own block first (no event), then its shared
		// ones, each stored on the CPU, which evicts its oldest.
		ev(h[3], TierGPU, true), ev(h[3], TierCPU, false),
		ev(h[2], TierGPU, true), ev(h[2], TierCPU, false),
		ev(h[1], TierGPU, true), ev(h[3], TierCPU, true), ev(h[1], TierCPU, false),
		ev(h[0], TierGPU, true), ev(h[2], TierCPU, true), ev(h[0], TierCPU, false),
	}, e.TakeKVBlockEvents(nil))
	require.Empty(t, e.TakeKVBlockEvents(nil))
}

// TestKVTiersValidate: settings the engine refuses, naming the field.
func TestKVTiersValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*EngineConfig)
		want string
	}{
		{"no block bytes", func(c *EngineConfig) { c.Tiers.Store = StoreLink{GetBytesPerS: 1, PutBytesPerS: 1} }, `"kv_tiers.block_bytes": must be > 0`},
		{"no prefix caching", func(c *EngineConfig) {
			c.PrefixCachingEnabled = false
			c.Tiers = KVTiers{BlockBytes: 1, Store: StoreLink{GetBytesPerS: 1, PutBytesPerS: 1}}
		}, "needs prefix caching"},
		{"disk without CPU", func(c *EngineConfig) {
			c.Tiers = KVTiers{BlockBytes: 1, Disk: DiskTier{Blocks: 1, ReadBytesPerS: 1, WriteBytesPerS: 1}}
		}, `"kv_disk": sits behind the CPU tier`},
		{"disk without blocks", func(c *EngineConfig) {
			c.Tiers = KVTiers{BlockBytes: 1, Disk: DiskTier{ReadBytesPerS: 1, WriteBytesPerS: 1}}
		}, `"kv_disk.blocks": must be > 0`},
		{"disk rate", func(c *EngineConfig) {
			c.TotalKVBlocksCPU, c.CPUOffloading = 4, true
			c.Tiers = KVTiers{BlockBytes: 1, Disk: DiskTier{Blocks: 1, ReadBytesPerS: 1}}
		}, `"kv_disk.write_bytes_per_s": must be in (0, 1e+15]`},
		{"store latency", func(c *EngineConfig) {
			c.Tiers = KVTiers{BlockBytes: 1, Store: StoreLink{GetBytesPerS: 1, PutBytesPerS: 1, LatencyUs: -1}}
		}, `"kv_store.latency_us": must be in [0, 3600000000] µs, got -1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			tc.set(&cfg.Engine)
			_, err := NewEngine(cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
	cfg := baseConfig()
	e, err := NewEngine(cfg)
	require.NoError(t, err)
	require.ErrorContains(t, e.AttachStore(&fakeStore{}), "no link to a KV store")
}

// With a CPU tier alone, the result reports the GPU's and the CPU tier's
// hit rates, which add up with the computed share to 1.
func TestCPUTierHitRate(t *testing.T) {
	cfg := baseConfig()
	cfg.Engine.TotalKVBlocksGPU = 8
	cfg.Engine.TotalKVBlocksCPU, cfg.Engine.CPUOffloading, cfg.Engine.OffloadThreshold = 8, true, 0
	a := RequestSpec{ID: 1, PromptTokens: 80, OutputTokens: 1, PrefixGroup: 1, PrefixTokens: 64}
	c := RequestSpec{ID: 2, ArrivalUs: 2000, PromptTokens: 128, OutputTokens: 1}
	b := RequestSpec{ID: 3, ArrivalUs: 10_000, PromptTokens: 80, OutputTokens: 1, PrefixGroup: 1, PrefixTokens: 64}
	res := run(t, cfg, []RequestSpec{a, c, b})
	kt := res.KVTiers
	require.Equal(t, &TierResult{HitTokens: 64, HitRate: 64.0 / 288}, kt.CPU)
	require.Equal(t, TierResult{}, kt.GPU)
	require.InDelta(t, 1, kt.GPU.HitRate+kt.CPU.HitRate+kt.ComputedRate, 1e-15)
	require.Nil(t, kt.Store)
}
