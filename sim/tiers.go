package sim

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/internal/units"
)

// KV tiers behind the GPU's prefix cache (docs/kv-tiers.md).
//
// Besides the GPU cache and the CPU tier (kvcache.go), an instance may
// have two more:
//
//   - a local disk behind the CPU tier (LMCache's local_disk, an NVMe
//     drive): the blocks the CPU tier evicts are written to it, at the
//     disk's write rate, one after the other, and can be read once
//     written;
//   - a store its cluster's instances share (LMCache's remote backend,
//     Mooncake Store): every shared block the instance fills is written
//     through to it (LMCache stores what a step computed), over the
//     instance's link, one block after the other, and other instances
//     read it from there.
//
// A request's prefix is looked up as vLLM's scheduler and its KV
// connector look it up: the GPU's prefix cache first, then block by block
// the CPU tier, the disk, the store (the first that holds a block serves
// it); the lookup stops at the first block no tier holds. CPU blocks are
// reloaded over PCIe, their time the latency model's transfer term, as
// before. Disk and store blocks are loaded before the step's forward pass
// (LMCache's retrieve blocks until the KV is in), so each request's load,
// the tier's latency plus its bytes over the tier's read rate, is added
// to the step's time. Blocks loaded from the disk or the store are then
// registered in the GPU's prefix cache as computed ones are (vLLM caches
// the blocks a connector loaded); blocks reloaded from the CPU tier are
// not, the CPU tier's older rule, kept.
//
// The store itself is the cluster's (package kvstore). An engine sees it
// through StoreKV as it was at the cluster's last sync point, and hands it
// its puts and reads, which the cluster applies at the next one: no
// engine touches the store's state while engines advance in parallel.

// Tier is where a block of KV is.
type Tier uint8

const (
	TierGPU Tier = iota
	TierCPU
	TierDisk
	TierStore
	// NumTiers is the number of tiers.
	NumTiers
)

var tierNames = [NumTiers]string{"gpu", "cpu", "disk", "store"}

// String is the tier's name: gpu, cpu, disk or store.
func (t Tier) String() string {
	if t < NumTiers {
		return tierNames[t]
	}
	return fmt.Sprintf("tier(%d)", t)
}

// KVTiers are an instance's tiers behind its GPU and CPU ones. The zero
// value is none.
type KVTiers struct {
	// BlockBytes is one block's KV on the instance, all its GPUs
	// together: what a tier stores, and a load moves, per block.
	BlockBytes int64
	Disk       DiskTier
	Store      StoreLink
}

// On reports whether any tier is set.
func (t *KVTiers) On() bool { return t.Disk != (DiskTier{}) || t.Store != (StoreLink{}) }

// DiskTier is a local disk behind the CPU tier.
type DiskTier struct {
	Blocks                        int64   // capacity (> 0)
	ReadBytesPerS, WriteBytesPerS float64 // (> 0)
	LatencyUs                     int64   // per read, per request; and after a write
}

// StoreLink is an instance's link to its cluster's shared store: the
// rates its reads (gets) and writes (puts) reach, and the latency of one
// get or put.
type StoreLink struct {
	GetBytesPerS, PutBytesPerS float64 // (> 0)
	LatencyUs                  int64
}

// Tier defaults, each from a public source (docs/kv-tiers.md).
const (
	// DefaultDiskReadBytesPerS, DefaultDiskWriteBytesPerS and
	// DefaultDiskLatencyUs are a PCIe 4.0 x4 NVMe drive's: 7 GB/s reads,
	// 5 GB/s writes (the class's datasheet figures; the link's ceiling is
	// 7.9 GB/s) and 80 µs (the seeds' own simulator's nvme_gen4 device
	// class, inference-sim defaults.yaml).
	DefaultDiskReadBytesPerS  = 7e9
	DefaultDiskWriteBytesPerS = 5e9
	DefaultDiskLatencyUs      = 80
	// DefaultStoreBytesPerSPerGPU is one GPU's link to the store: its
	// 400 Gb/s RDMA NIC (one per GPU on H100 nodes) at the rate Mooncake's
	// transfer engine measured, 190 GB/s over 8 × 400 Gb/s NICs.
	DefaultStoreBytesPerSPerGPU = 190e9 / 8
	// DefaultStoreLatencyUs is a get's or put's fixed cost: LMCache's
	// lookups in Mooncake Store take 1-2 ms (LMCache pull 934).
	DefaultStoreLatencyUs = 1000
)

// maxTierBytesPerS bounds a tier's rate (1 PB/s): far above any device,
// and low enough that one block's time stays a finite number of µs.
const maxTierBytesPerS = 1e15

func (t *KVTiers) validate(c *EngineConfig) error {
	if !t.On() {
		return nil
	}
	switch {
	case t.BlockBytes <= 0:
		return fieldErr("kv_tiers.block_bytes", "must be > 0 with a disk or store tier, got %d", t.BlockBytes)
	case !c.PrefixCachingEnabled:
		return fieldErr("kv_tiers", "needs prefix caching: a tier's blocks are found again by their prefix hash")
	}
	rate := func(field string, v float64) error {
		if !(v > 0 && v <= maxTierBytesPerS) {
			return fieldErr(field, "must be in (0, %g] bytes/s, got %v", maxTierBytesPerS, v)
		}
		return nil
	}
	lat := func(field string, v int64) error {
		if v < 0 || v > maxPipelineDelayUs {
			return fieldErr(field, "must be in [0, %d] µs, got %d", int64(maxPipelineDelayUs), v)
		}
		return nil
	}
	if d := t.Disk; d != (DiskTier{}) {
		switch {
		case d.Blocks <= 0:
			return fieldErr("kv_disk.blocks", "must be > 0, got %d", d.Blocks)
		case c.TotalKVBlocksCPU <= 0:
			return fieldErr("kv_disk", "sits behind the CPU tier (it takes what the CPU tier evicts): give CPU KV blocks")
		}
		for _, err := range []error{rate("kv_disk.read_bytes_per_s", d.ReadBytesPerS), rate("kv_disk.write_bytes_per_s", d.WriteBytesPerS), lat("kv_disk.latency_us", d.LatencyUs)} {
			if err != nil {
				return err
			}
		}
	}
	if s := t.Store; s != (StoreLink{}) {
		for _, err := range []error{rate("kv_store.get_bytes_per_s", s.GetBytesPerS), rate("kv_store.put_bytes_per_s", s.PutBytesPerS), lat("kv_store.latency_us", s.LatencyUs)} {
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// StoreKV is an instance's view of the KV store its cluster shares
// (package kvstore). Reads see the store as it was at the cluster's last
// sync point; puts and reads are applied at the next one.
type StoreKV interface {
	// Has reports whether the store held the block hashed h at the last
	// sync point.
	Has(h uint64) bool
	// Put hands the store a block the instance filled; it is in the store
	// from visibleUs on (from the first sync point at or after it).
	Put(h uint64, visibleUs int64)
	// Read records that the instance loaded block h at atUs (its recency
	// in the store).
	Read(h uint64, atUs int64)
	// Detached is a view of the same store whose puts and reads go
	// nowhere: an engine clone's (Engine.Clone), which must not change
	// what the original run sees.
	Detached() StoreKV
}

// KVBlockEvent is a shared block entering or leaving one of an
// instance's tiers: vLLM's BlockStored and BlockRemoved KV events with
// their medium, what llm-d's precise prefix-cache scorer indexes. Only
// shared content is reported (an instance's own blocks can never match
// another request).
type KVBlockEvent struct {
	Hash    uint64
	Tier    Tier // TierGPU, TierCPU or TierDisk
	Removed bool
}

// tierState is the KV cache's state for the tiers beyond the GPU: it
// exists when there is a CPU tier, a disk, a store link, or KV block
// events are watched.
type tierState struct {
	cfg     KVTiers
	bs      int64    // tokens per block
	disk    *cpuTier // nil: no disk
	store   StoreKV  // nil until attached (AttachStore)
	putFree int64    // when the store link's puts are next free, µs
	// diskFree is when the disk's writes are next free, µs.
	diskFree int64
	stepEnd  int64 // the end of the step in flight: a step's puts start then
	loadUs   int64 // the step's disk and store load time so far
	// The last lookup past the GPU's hits: each block's tier (when more
	// than the CPU tier can serve) and how many blocks each tier serves.
	tier []Tier
	n    [NumTiers]int64
	// Prompt tokens served at first admission by tier (the GPU's are
	// metrics.cachedTokens), blocks loaded and the time loads took by
	// tier, blocks put to the store.
	hitTokens         [NumTiers]int64
	loaded, loadTotal [NumTiers]int64
	putBlocks         int64
	// KV block events, recorded while watch is on; gpuLive counts the
	// shared GPU blocks registered since (INV-4: the index's size).
	watch   bool
	events  []KVBlockEvent
	gpuLive int64
}

// initTiers sets up the tiers beyond the GPU (called once, by NewEngine).
func (c *kvCache) initTiers(cfg *EngineConfig) {
	if c.cpu == nil && !cfg.Tiers.On() {
		return
	}
	x := &tierState{cfg: cfg.Tiers, bs: c.blockSize}
	c.x = x
	if c.cpu != nil {
		c.cpu.x, c.cpu.tier = x, TierCPU
	}
	if d := cfg.Tiers.Disk; d.Blocks > 0 {
		x.disk = newCPUTier(d.Blocks, 0)
		x.disk.x, x.disk.tier = x, TierDisk
	}
}

// clone is a copy of the tiers' state for c, a clone of the cache (its
// CPU tier already copied): the disk copied, the store detached (a
// clone's puts and reads must not reach the run's store), no KV block
// events.
func (x *tierState) clone(c *kvCache) *tierState {
	if x == nil {
		return nil
	}
	y := *x
	y.tier, y.events, y.watch, y.gpuLive = nil, nil, false, 0
	if x.store != nil {
		y.store = x.store.Detached()
	}
	if x.disk != nil {
		y.disk = x.disk.clone()
		y.disk.x = &y
	}
	if c.cpu != nil {
		c.cpu.x = &y
	}
	return &y
}

// xferUs is the time of n blocks at rate bytes/s, rounded up to the µs,
// at most MaxDurationUs (internal/units.TransferUs: a store read at 1e-15
// GB/s once gave a load time of -9.2e18 µs).
func (x *tierState) xferUs(n int64, rate float64) int64 {
	return units.TransferUs(float64(n)*float64(x.cfg.BlockBytes), rate)
}

// event records a KV block event when they are watched.
func (x *tierState) event(h uint64, t Tier, removed bool) {
	if !x.watch {
		return
	}
	x.events = append(x.events, KVBlockEvent{Hash: h, Tier: t, Removed: removed})
	if t == TierGPU {
		if removed {
			x.gpuLive--
		} else {
			x.gpuLive++
		}
	}
}

// filled is told that shared block h was registered on the GPU: an event,
// and the write-through put to the store, which starts when the step that
// filled it ends and its link is free.
func (x *tierState) filled(h uint64) {
	x.event(h, TierGPU, false)
	if x.store == nil || x.store.Has(h) {
		return
	}
	x.putFree = units.Add(max(x.putFree, x.stepEnd), x.xferUs(1, x.cfg.Store.PutBytesPerS))
	x.store.Put(h, units.Add(x.putFree, x.cfg.Store.LatencyUs))
	x.putBlocks++
}

// evicted is told that tier t (CPU or disk) dropped block h at now: an
// event, and the CPU tier's victim is written to the disk, readable once
// its write (after the writes before it) and the disk's latency are done.
func (x *tierState) evicted(t Tier, h uint64, shared bool, now int64) {
	if shared {
		x.event(h, t, true)
	}
	if t == TierCPU && x.disk != nil {
		x.diskFree = units.Add(max(x.diskFree, now), x.xferUs(1, x.cfg.Disk.WriteBytesPerS))
		x.disk.store(h, units.Add(x.diskFree, x.cfg.Disk.LatencyUs), shared)
	}
}

// addLoad adds the step's disk and store loads to its time dt (saturating)
// and notes when the step ends, for its puts.
func (x *tierState) addLoad(now, dt int64) int64 {
	if x.loadUs > 0 {
		if dt < math.MaxInt64-x.loadUs {
			dt += x.loadUs
		} else {
			dt = math.MaxInt64
		}
		x.loadUs = 0
	}
	x.stepEnd = now + min(max(dt, 1), MaxDurationUs)
	return dt
}

// matchTiers counts r's blocks from hits on, up to maxHit, that the tiers
// behind the GPU hold, leading ones only, and notes which tier serves each
// (x.n, and x.tier when more than the CPU tier can serve).
func (e *Engine) matchTiers(r *request, hits, maxHit int64) int64 {
	x, cpu := e.kv.x, e.kv.cpu
	x.n = [NumTiers]int64{}
	if x.disk == nil && x.store == nil {
		if cpu == nil {
			return 0
		}
		// The CPU tier alone: its leading run (the path before the other
		// tiers).
		e.ensureHashes(r, maxHit)
		n := cpu.match(r.hashes[hits:maxHit])
		x.n[TierCPU] = n
		return n
	}
	if cpu == nil && x.disk == nil {
		// Only the store, which holds shared blocks only.
		maxHit = min(maxHit, SharedBlocks(&r.spec, e.blockSize))
	}
	if hits >= maxHit {
		return 0
	}
	e.ensureHashes(r, maxHit)
	x.tier = x.tier[:0]
	for _, h := range r.hashes[hits:maxHit] {
		var t Tier
		switch {
		case cpu != nil && cpu.has(h):
			t = TierCPU
		case x.disk != nil && x.disk.ready(h, e.now):
			t = TierDisk
		case x.store != nil && x.store.Has(h):
			t = TierStore
		default:
			return int64(len(x.tier))
		}
		x.tier = append(x.tier, t)
		x.n[t]++
	}
	return int64(len(x.tier))
}

// loadTiers reads the reload blocks of r from hits on that matchTiers
// found, at admission: CPU blocks over PCIe (the step's ReloadBlocks),
// disk and store blocks before the forward pass (their time added to the
// step's). It returns how many came from the disk or the store: those
// are registered on the GPU as computed blocks are.
func (e *Engine) loadTiers(r *request, hits, reload int64) (fetched int64) {
	x := e.kv.x
	hs := r.hashes[hits : hits+reload]
	var thrash int64
	if x.n[TierCPU] == reload {
		thrash = e.kv.cpu.reload(hs, e.now)
	} else {
		for i, h := range hs {
			switch x.tier[i] {
			case TierCPU:
				thrash += e.kv.cpu.reload(hs[i:i+1], e.now)
			case TierDisk:
				x.disk.touch(h)
			case TierStore:
				x.store.Read(h, e.now)
			}
		}
	}
	if n := x.n[TierCPU]; n > 0 {
		e.batch.ReloadBlocks += n
		if o := e.cfg.Observer; o != nil {
			e.kev = KVEvent{Kind: KVLoad, Step: e.stepID, AtUs: e.now, Req: r.spec.ID, Blocks: n, Thrashing: thrash}
			o.KV(&e.kev)
		}
	}
	x.load(TierDisk, x.cfg.Disk.LatencyUs, x.cfg.Disk.ReadBytesPerS)
	x.load(TierStore, x.cfg.Store.LatencyUs, x.cfg.Store.GetBytesPerS)
	if r.preemptions == 0 {
		for t := TierCPU; t < NumTiers; t++ {
			x.hitTokens[t] += x.n[t] * e.blockSize
		}
	}
	return x.n[TierDisk] + x.n[TierStore]
}

// load charges the step one request's load from tier t: its latency and
// its blocks at the tier's read rate.
func (x *tierState) load(t Tier, latencyUs int64, rate float64) {
	if n := x.n[t]; n > 0 {
		us := latencyUs + x.xferUs(n, rate)
		x.loadUs = units.Add(x.loadUs, us)
		x.loadTotal[t] = units.Add(x.loadTotal[t], us)
		x.loaded[t] += n
	}
}

// AttachStore connects the engine to its cluster's shared KV store, which
// it reaches over EngineConfig.Tiers.Store's link. Call it before the
// engine serves a request.
func (e *Engine) AttachStore(s StoreKV) error {
	x := e.kv.x
	if x == nil || x.cfg.Store == (StoreLink{}) {
		return fmt.Errorf("sim: the engine has no link to a KV store (EngineConfig.Tiers.Store)")
	}
	if e.injected > 0 {
		return fmt.Errorf("sim: a KV store is attached before the engine serves a request")
	}
	x.store = s
	return nil
}

// WatchKVBlocks turns on KV block events: from now on the engine records
// every shared block that enters or leaves its GPU cache, CPU tier or
// disk (TakeKVBlockEvents), as vLLM's KV events publisher does.
func (e *Engine) WatchKVBlocks() {
	if e.kv.x == nil {
		e.kv.x = &tierState{cfg: e.cfg.Engine.Tiers, bs: e.blockSize}
	}
	x := e.kv.x
	if !x.watch {
		x.watch = true
		if e.kv.index != nil {
			x.gpuLive = int64(e.kv.index.Len())
		}
	}
}

// TakeKVBlockEvents appends the KV block events recorded since the last
// call to dst, in the order they happened, and forgets them.
func (e *Engine) TakeKVBlockEvents(dst []KVBlockEvent) []KVBlockEvent {
	x := e.kv.x
	if x == nil || len(x.events) == 0 {
		return dst
	}
	dst = append(dst, x.events...)
	x.events = x.events[:0]
	return dst
}

// KVCapacityBlocks is how many blocks the instance's own tiers hold: its
// GPU cache, CPU tier and disk (a router sizes its picture of the
// instance by it).
func (e *Engine) KVCapacityBlocks() int64 {
	n := e.kv.total()
	if c := e.kv.cpu; c != nil {
		n += c.capacity
	}
	if x := e.kv.x; x != nil && x.disk != nil {
		n += x.disk.capacity
	}
	return n
}

// KVTiersResult is where the prompt tokens' KV came from when their
// requests were first admitted, tier by tier (the rest was computed), and
// what the disk and the store moved.
type KVTiersResult struct {
	PromptTokens int64       `json:"prompt_tokens"`
	GPU          TierResult  `json:"gpu"`
	CPU          *TierResult `json:"cpu,omitempty"`
	Disk         *TierResult `json:"disk,omitempty"`
	Store        *TierResult `json:"store,omitempty"`
	// ComputedRate is the share of prompt tokens no tier held.
	ComputedRate float64 `json:"computed_rate"`
}

// TierResult is one tier's part. HitTokens are prompt tokens it served at
// their request's first admission, HitRate their share of the prompt
// tokens. LoadedBlocks counts every load (a preempted request's reload
// too) and LoadUs the step time they took; StoredBlocks the blocks
// written to it (the disk: those the CPU tier evicted; the store: the
// instance's puts) and EvictedBlocks those it dropped (the disk).
type TierResult struct {
	HitTokens     int64   `json:"hit_tokens"`
	HitRate       float64 `json:"hit_rate"`
	LoadedBlocks  int64   `json:"loaded_blocks,omitempty"`
	LoadUs        int64   `json:"load_us,omitempty"`
	StoredBlocks  int64   `json:"stored_blocks,omitempty"`
	EvictedBlocks int64   `json:"evicted_blocks,omitempty"`
}

// Add adds o's counts to r (an instance's to a cluster's); Rates then
// recomputes the shares.
func (r *KVTiersResult) Add(o *KVTiersResult) {
	if o == nil {
		return
	}
	r.PromptTokens += o.PromptTokens
	r.GPU.add(&o.GPU)
	r.CPU = addTier(r.CPU, o.CPU)
	r.Disk = addTier(r.Disk, o.Disk)
	r.Store = addTier(r.Store, o.Store)
}

func addTier(dst, src *TierResult) *TierResult {
	if src == nil {
		return dst
	}
	if dst == nil {
		dst = &TierResult{}
	}
	dst.add(src)
	return dst
}

func (t *TierResult) add(o *TierResult) {
	t.HitTokens += o.HitTokens
	t.LoadedBlocks += o.LoadedBlocks
	t.LoadUs += o.LoadUs
	t.StoredBlocks += o.StoredBlocks
	t.EvictedBlocks += o.EvictedBlocks
}

// Rates computes the hit rates and the computed share from the counts.
func (r *KVTiersResult) Rates() {
	served := r.GPU.HitTokens
	for _, t := range []*TierResult{&r.GPU, r.CPU, r.Disk, r.Store} {
		if t == nil {
			continue
		}
		if t != &r.GPU {
			served += t.HitTokens
		}
		t.HitRate = 0
		if r.PromptTokens > 0 {
			t.HitRate = float64(t.HitTokens) / float64(r.PromptTokens)
		}
	}
	r.ComputedRate = 0
	if r.PromptTokens > 0 {
		r.ComputedRate = float64(r.PromptTokens-served) / float64(r.PromptTokens)
	}
}

// tiersResult is the engine's KVTiersResult, nil without tiers beyond
// the GPU.
func (e *Engine) tiersResult() *KVTiersResult {
	x := e.kv.x
	if x == nil || (e.kv.cpu == nil && !x.cfg.On()) {
		return nil
	}
	r := &KVTiersResult{PromptTokens: e.m.promptTokens, GPU: TierResult{HitTokens: e.m.cachedTokens}}
	if e.kv.cpu != nil {
		r.CPU = &TierResult{HitTokens: x.hitTokens[TierCPU]}
	}
	if d := x.disk; d != nil {
		r.Disk = &TierResult{HitTokens: x.hitTokens[TierDisk], LoadedBlocks: x.loaded[TierDisk], LoadUs: x.loadTotal[TierDisk],
			StoredBlocks: d.stored, EvictedBlocks: d.evicted}
	}
	if x.cfg.Store != (StoreLink{}) {
		r.Store = &TierResult{HitTokens: x.hitTokens[TierStore], LoadedBlocks: x.loaded[TierStore], LoadUs: x.loadTotal[TierStore],
			StoredBlocks: x.putBlocks}
	}
	r.Rates()
	return r
}

// checkTiers is INV-4 for the tiers: a tier holds no more than its
// capacity, its LRU list and its index agree (full), and with KV block
// events on, the GPU blocks they report as present are the prefix
// index's (full).
func (e *Engine) checkTiers(full bool) {
	x := e.kv.x
	if x == nil {
		return
	}
	for _, t := range []*cpuTier{e.kv.cpu, x.disk} {
		if t == nil {
			continue
		}
		if n := int64(len(t.entries)); n > t.capacity {
			e.fail("INV-4", "the %s tier holds %d blocks, more than its %d", t.tier, n, t.capacity)
		}
		if !full {
			continue
		}
		var n int
		for en := t.head; en != nil; en = en.next {
			if got, ok := t.entries[en.hash]; !ok || got != en {
				e.fail("INV-4", "the %s tier's LRU list holds block %#x, which its index does not point to", t.tier, en.hash)
			}
			n++
		}
		if n != len(t.entries) {
			e.fail("INV-4", "the %s tier's LRU list holds %d blocks, its index %d", t.tier, n, len(t.entries))
		}
	}
	if full && x.watch && e.kv.index != nil && x.gpuLive != int64(e.kv.index.Len()) {
		e.fail("INV-4", "KV block events report %d shared blocks on the GPU; its prefix index holds %d", x.gpuLive, e.kv.index.Len())
	}
}
