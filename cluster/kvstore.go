package cluster

import (
	"fmt"
	"math"
	"slices"

	"github.com/blis-sim/blis/cluster/route"
	"github.com/blis-sim/blis/kvstore"
	"github.com/blis-sim/blis/sim"
)

// The fleet's shared KV store (docs/kv-tiers.md). The cluster owns it;
// every instance with a store link (sim.KVTiers.Store) is attached to it
// through a view that reads the store as it was at the last sync point and
// records its puts and gets. Sync points are every SyncUs µs of simulated
// time: at the first cluster instant at or after one, before any event of
// that instant, the cluster gathers the views' operations in instance
// order and the store applies those due by then in (time, instance,
// sequence) order (kvstore.Apply). Parallel windows stop at the next sync
// point (bound), so the instances see the same store at the same events
// for any number of workers.

// KVStore is the fleet's shared KV store.
type KVStore struct {
	Store kvstore.Config
	// SyncUs is how often the instances' view of the store is brought up
	// to date (0: DefaultKVStoreSyncUs).
	SyncUs int64
}

// DefaultKVStoreSyncUs is the sync period: 1 ms, the order of a store
// lookup's own latency (sim.DefaultStoreLatencyUs), so the staleness it
// adds is of the size the lookup already has.
const DefaultKVStoreSyncUs = 1000

// storeView is an instance's view of the store (sim.StoreKV).
type storeView struct {
	st       *kvstore.Store
	src      int32
	bytes    int64
	seq      int64
	ops      []kvstore.Op
	detached bool
}

func (v *storeView) Has(h uint64) bool { return v.st.Has(h) }

func (v *storeView) Put(h uint64, visibleUs int64) { v.op(kvstore.OpPut, h, visibleUs) }

func (v *storeView) Read(h uint64, atUs int64) { v.op(kvstore.OpGet, h, atUs) }

func (v *storeView) op(k kvstore.Kind, h uint64, at int64) {
	if v.detached {
		return
	}
	v.ops = append(v.ops, kvstore.Op{AtUs: at, Src: v.src, Seq: v.seq, Kind: k, Key: h, Bytes: v.bytes})
	v.seq++
}

func (v *storeView) Detached() sim.StoreKV { return &storeView{st: v.st, detached: true} }

// storeState is the store and the instances' views of it.
type storeState struct {
	st    *kvstore.Store
	views []*storeView // in instance order; nil for an instance without a link
	pend  []kvstore.Op // gathered, not yet due, sorted
	// fresh and merged are scratch space.
	fresh, merged []kvstore.Op
	period        int64
	next          int64 // the next sync point
	// The block size and bytes every attached instance shares: a block's
	// hash means the same KV on each.
	blockTokens, blockBytes int64
}

func (c *Sim) newKVStore() error {
	cfg := c.cfg.KVStore
	if cfg.SyncUs < 0 || cfg.SyncUs > sim.MaxDurationUs {
		return fmt.Errorf("kv store: sync period must be in [0, %d] µs, got %d", sim.MaxDurationUs, cfg.SyncUs)
	}
	st, err := kvstore.New(cfg.Store)
	if err != nil {
		return err
	}
	s := &storeState{st: st, period: cfg.SyncUs}
	if s.period == 0 {
		s.period = DefaultKVStoreSyncUs
	}
	s.next = s.period
	c.kvs = s
	for i := range c.eng {
		if err := c.attachStore(i, &c.cfg.Instances[i].Config); err != nil {
			return err
		}
	}
	return nil
}

// attachStore connects instance i, when it has a store link, to the
// store.
func (c *Sim) attachStore(i int, cfg *sim.Config) error {
	s := c.kvs
	if s == nil {
		return nil
	}
	for len(s.views) <= i {
		s.views = append(s.views, nil)
	}
	t := &cfg.Engine.Tiers
	if t.Store == (sim.StoreLink{}) {
		return nil
	}
	bt := cfg.Engine.BlockSizeTokens
	if s.blockBytes == 0 {
		s.blockTokens, s.blockBytes = bt, t.BlockBytes
	} else if s.blockTokens != bt || s.blockBytes != t.BlockBytes {
		return fmt.Errorf("instance %s: its KV blocks (%d tokens, %d bytes) differ from the other instances' on the shared store (%d tokens, %d bytes): instances sharing a store must hold the same model's KV at the same block size",
			c.ids[i], bt, t.BlockBytes, s.blockTokens, s.blockBytes)
	}
	v := &storeView{st: s.st, src: int32(i), bytes: t.BlockBytes}
	s.views[i] = v
	if err := c.eng[i].AttachStore(v); err != nil {
		return fmt.Errorf("instance %s: %w", c.ids[i], err)
	}
	return nil
}

// kvSync brings the store up to date at a cluster instant t: when t is at
// or past the next sync point, the operations recorded so far, those due
// by t, are applied.
func (c *Sim) kvSync(t int64) {
	s := c.kvs
	if s == nil || t < s.next {
		return
	}
	// The new operations, sorted, merged into the pending ones (sorted).
	s.fresh = s.fresh[:0]
	for _, v := range s.views {
		if v != nil && len(v.ops) > 0 {
			s.fresh = append(s.fresh, v.ops...)
			v.ops = v.ops[:0]
		}
	}
	if len(s.fresh) > 0 {
		slices.SortFunc(s.fresh, kvstore.Compare)
		s.merged = kvstore.Merge(s.merged[:0], s.pend, s.fresh)
		s.pend, s.merged = s.merged, s.pend
	}
	later := s.st.ApplySorted(s.pend, t)
	s.pend = append(s.pend[:0], later...)
	if t > math.MaxInt64-s.period {
		s.next = math.MaxInt64
		return
	}
	s.next = (t/s.period + 1) * s.period
}

// kvStoreStats is the store's part of the result.
func (c *Sim) kvStoreStats() *kvstore.Stats {
	if c.kvs == nil {
		return nil
	}
	st := c.kvs.st.Stats()
	return &st
}

// sizePrefixIndex sizes the router's prefix index for instance i, when the
// router keeps one sized from the instances (route.AutoPrefixIndexCapacity):
// the instance's own KV capacity (its GPU blocks, CPU tier and disk; the
// shared store is no instance's), in the router's blocks.
func (c *Sim) sizePrefixIndex(i int) {
	for _, r := range c.routers() {
		pi, ok := r.(route.PrefixIndexer)
		if !ok {
			continue
		}
		if x := pi.PrefixIndex(); x != nil && x.Auto() {
			e := c.eng[i]
			x.SizeInstance(i, e.KVCapacityBlocks()*e.BlockSize()/c.bs)
		}
	}
}

// routers are the routing policies: the router's and, under
// disaggregation, the prefill router's.
func (c *Sim) routers() []route.Policy {
	rs := []route.Policy{c.router}
	if c.pd != nil && c.pd.cfg.Prefill != nil {
		rs = append(rs, c.pd.cfg.Prefill)
	}
	return rs
}

// initPrecise feeds the router's precise prefix index, when it has one
// (route.PrefixPrecise): every instance reports its KV block events, which
// the index reads before each routing decision (feedPrecise), and the
// index reads the shared store for the instances linked to it.
func (c *Sim) initPrecise() error {
	for _, r := range c.routers() {
		if pi, ok := r.(route.PreciseIndexer); ok && pi.PreciseIndex() != nil {
			x := pi.PreciseIndex()
			if c.kvs != nil {
				x.SetStore(c.kvs.st.Has)
			}
			c.precise = append(c.precise, x)
		}
	}
	for i := range c.eng {
		if err := c.watchPrecise(i); err != nil {
			return err
		}
	}
	return nil
}

func (c *Sim) watchPrecise(i int) error {
	if c.precise == nil {
		return nil
	}
	e := c.eng[i]
	if e.BlockSize() != c.bs {
		return fmt.Errorf("instance %s: the precise prefix index reads its KV events, whose blocks are %d tokens; the router's are %d", c.ids[i], e.BlockSize(), c.bs)
	}
	e.WatchKVBlocks()
	if c.kvs != nil && i < len(c.kvs.views) && c.kvs.views[i] != nil {
		for _, x := range c.precise {
			x.Link(i)
		}
	}
	return nil
}

// feedPrecise hands the precise index the KV block events the instances
// recorded since the last decision, instance by instance: every event
// before the decision's instant (the instances are there, with one worker
// or several).
func (c *Sim) feedPrecise() {
	for i, e := range c.eng {
		c.kevBuf = e.TakeKVBlockEvents(c.kevBuf[:0])
		for _, x := range c.precise {
			for _, ev := range c.kevBuf {
				x.Apply(i, ev)
			}
		}
	}
}
