// Package kvstore is a KV-cache store a fleet's instances share (LMCache's
// remote backend, Mooncake Store): objects (KV blocks, keyed by their
// chained prefix hash) of a size in bytes, a capacity in bytes, and
// eviction at a high watermark, as Mooncake Store's master does it.
//
// Eviction (Mooncake Store, docs/kv-tiers.md): an eviction round drops
// the least recently used EvictionRatio of the store's objects, rounded up
// (at least one). A put that takes the usage above HighWatermark ×
// capacity is followed by one round (Mooncake's eviction thread, run at
// once); a put the free space cannot take first runs rounds until it fits
// (Mooncake's failed PutStart). Mooncake's defaults are 0.95 and 0.05
// (DEFAULT_EVICTION_HIGH_WATERMARK_RATIO, DEFAULT_EVICTION_RATIO). Recency is the order of puts and gets as
// they are applied; Mooncake's is an approximate LRU, this one is exact.
//
// Instances do not touch the store directly while they advance in
// parallel: they record operations (Op), which Apply executes in a fixed
// order (time, source, sequence), so the store's state never depends on
// how instances were interleaved. Bandwidth and latency are the links'
// (sim.StoreLink): the instance charges them to its step and to its puts'
// visibility before the operation reaches the store.
//
// The package is pure: no clock, no goroutines, no map iteration. It is
// not safe for concurrent use, except that Has may be called concurrently
// while nothing modifies the store.
package kvstore

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/blis-sim/blis/internal/hashindex"
	"github.com/blis-sim/blis/internal/lru"
)

// Mooncake Store master's eviction defaults (mooncake-store's types.h:
// DEFAULT_EVICTION_HIGH_WATERMARK_RATIO = 0.95, DEFAULT_EVICTION_RATIO =
// 0.05; docs/source/design/mooncake-store.md, "Eviction Policy").
const (
	DefaultHighWatermark = 0.95
	DefaultEvictionRatio = 0.05
)

// Config is a store's size and eviction.
type Config struct {
	CapacityBytes int64   // > 0
	HighWatermark float64 // in (0, 1]; 0: DefaultHighWatermark
	EvictionRatio float64 // in (0, 1]; 0: DefaultEvictionRatio
}

// Stats are what a store did.
type Stats struct {
	CapacityBytes int64 `json:"capacity_bytes"`
	UsedBytes     int64 `json:"used_bytes"`
	PeakBytes     int64 `json:"peak_bytes"`
	Objects       int64 `json:"objects"`
	// Puts are puts that stored an object; DuplicatePuts those of an
	// object already there (they refresh its recency); RejectedPuts those
	// of an object larger than the watermark allows.
	Puts          int64 `json:"puts"`
	DuplicatePuts int64 `json:"duplicate_puts,omitempty"`
	RejectedPuts  int64 `json:"rejected_puts,omitempty"`
	// Gets are reads of an object; MissedGets reads of one evicted
	// before the read was applied.
	Gets         int64 `json:"gets"`
	MissedGets   int64 `json:"missed_gets,omitempty"`
	Evictions    int64 `json:"evictions"`     // eviction rounds
	EvictedBytes int64 `json:"evicted_bytes"` // bytes they freed
	Evicted      int64 `json:"evicted"`       // objects they dropped
}

// object is a stored object, a node of the recency list (internal/lru:
// front the most recently used, back the least).
type object struct {
	key   uint64
	bytes int64
}

// Store is the shared store. Objects live on a recency list
// (internal/lru, the router's prefix index's kernel), found by an
// open-addressing index over their keys (internal/hashindex, as the
// engine's prefix cache): no allocation per object, and lookups that may
// run concurrently while nothing modifies the store.
type Store struct {
	cfg        Config
	limit      int64 // HighWatermark × capacity, bytes
	maxObjects int   // the index's bound
	idx        *hashindex.Index
	lru        lru.List[object]
	st         Stats
}

// maxObjects bounds the number of objects (the index numbers them in
// int32): at most one per byte of capacity, at most 2^30.
const maxObjects = 1 << 30

// New returns an empty store.
func New(cfg Config) (*Store, error) {
	if cfg.HighWatermark == 0 {
		cfg.HighWatermark = DefaultHighWatermark
	}
	if cfg.EvictionRatio == 0 {
		cfg.EvictionRatio = DefaultEvictionRatio
	}
	switch {
	case cfg.CapacityBytes <= 0:
		return nil, fmt.Errorf("kvstore: capacity must be > 0 bytes, got %d", cfg.CapacityBytes)
	case !(cfg.HighWatermark > 0 && cfg.HighWatermark <= 1):
		return nil, fmt.Errorf("kvstore: high watermark must be in (0, 1], got %v", cfg.HighWatermark)
	case !(cfg.EvictionRatio > 0 && cfg.EvictionRatio <= 1):
		return nil, fmt.Errorf("kvstore: eviction ratio must be in (0, 1], got %v", cfg.EvictionRatio)
	}
	lim := math.Floor(cfg.HighWatermark * float64(cfg.CapacityBytes))
	s := &Store{cfg: cfg, limit: int64(lim), maxObjects: int(min(cfg.CapacityBytes, maxObjects)), lru: lru.New[object](),
		st: Stats{CapacityBytes: cfg.CapacityBytes}}
	s.idx = hashindex.New(int64(s.maxObjects), func(v int32) uint64 { return s.lru.At(v).key })
	return s, nil
}

// Config is the store's configuration, defaults filled in.
func (s *Store) Config() Config { return s.cfg }

// Has reports whether the store holds key.
func (s *Store) Has(key uint64) bool {
	_, ok := s.idx.Get(key)
	return ok
}

// Len is the number of objects held.
func (s *Store) Len() int { return s.idx.Len() }

// Stats is what the store did so far.
func (s *Store) Stats() Stats {
	st := s.st
	st.Objects = int64(s.idx.Len())
	return st
}

// Put stores key with its size (or, when it is there, makes it the most
// recently used), evicting first when it would not fit under the
// watermark. It reports whether key is in the store afterwards.
func (s *Store) Put(key uint64, bytes int64) bool {
	if n, ok := s.idx.Get(key); ok {
		s.st.DuplicatePuts++
		s.lru.MoveToFront(n)
		return true
	}
	if bytes <= 0 || bytes > s.cfg.CapacityBytes {
		s.st.RejectedPuts++
		return false
	}
	// A put the free space cannot take fails and triggers an eviction
	// (Mooncake's PutStart), retried until it fits.
	for s.st.UsedBytes+bytes > s.cfg.CapacityBytes || s.idx.Len() >= s.maxObjects {
		s.evict()
	}
	n := s.lru.Alloc(object{key: key, bytes: bytes})
	s.idx.Put(key, n)
	s.lru.PushFront(n)
	s.st.UsedBytes += bytes
	s.st.PeakBytes = max(s.st.PeakBytes, s.st.UsedBytes)
	s.st.Puts++
	// Usage above the watermark: the eviction thread's round, at once.
	if s.st.UsedBytes > s.limit {
		s.evict()
	}
	return s.Has(key)
}

// Get reads key: it becomes the most recently used. It reports whether
// the store held it.
func (s *Store) Get(key uint64) bool {
	n, ok := s.idx.Get(key)
	if !ok {
		s.st.MissedGets++
		return false
	}
	s.st.Gets++
	s.lru.MoveToFront(n)
	return true
}

// evict drops the least recently used EvictionRatio of the objects,
// rounded up (at least one): one eviction round.
func (s *Store) evict() {
	k := int64(math.Ceil(s.cfg.EvictionRatio * float64(s.idx.Len())))
	k = max(k, 1)
	s.st.Evictions++
	for ; k > 0 && s.lru.Back() >= 0; k-- {
		n := s.lru.Back()
		e := s.lru.At(n)
		s.lru.Unlink(n)
		s.idx.Del(e.key, n)
		s.st.UsedBytes -= e.bytes
		s.st.EvictedBytes += e.bytes
		s.st.Evicted++
		s.lru.Free(n)
	}
}

// Kind is an operation's kind.
type Kind uint8

const (
	OpPut Kind = iota
	OpGet
)

// Op is an operation an instance recorded: a put of Key (Bytes long) that
// becomes visible at AtUs, or a get at AtUs. Src is the instance, Seq its
// own count of operations: together they order operations of equal time.
type Op struct {
	AtUs  int64
	Src   int32
	Seq   int64
	Kind  Kind
	Key   uint64
	Bytes int64
}

// Compare orders operations by time, then source, then sequence.
func Compare(a, b Op) int {
	if c := cmp.Compare(a.AtUs, b.AtUs); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Src, b.Src); c != 0 {
		return c
	}
	return cmp.Compare(a.Seq, b.Seq)
}

// Apply sorts ops (Compare) and executes those at or before nowUs in that
// order; it returns the rest (a suffix of ops, in order), to be applied
// later.
func (s *Store) Apply(ops []Op, nowUs int64) (later []Op) {
	slices.SortFunc(ops, Compare)
	return s.ApplySorted(ops, nowUs)
}

// Merge appends to dst the operations of a and b, each sorted (Compare),
// in order.
func Merge(dst, a, b []Op) []Op {
	for len(a) > 0 && len(b) > 0 {
		if Compare(b[0], a[0]) < 0 {
			dst = append(dst, b[0])
			b = b[1:]
		} else {
			dst = append(dst, a[0])
			a = a[1:]
		}
	}
	dst = append(dst, a...)
	return append(dst, b...)
}

// ApplySorted is Apply for ops already sorted.
func (s *Store) ApplySorted(ops []Op, nowUs int64) (later []Op) {
	for k := range ops {
		op := &ops[k]
		if op.AtUs > nowUs {
			return ops[k:]
		}
		switch op.Kind {
		case OpPut:
			s.Put(op.Key, op.Bytes)
		case OpGet:
			s.Get(op.Key)
		}
	}
	return ops[len(ops):]
}
