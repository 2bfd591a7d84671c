package kvstore

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func keys(s *Store) []uint64 {
	var ks []uint64
	for n := s.lru.Back(); n >= 0; n = s.lru.Prev(n) {
		ks = append(ks, s.lru.At(n).key)
	}
	return ks
}

func TestDefaults(t *testing.T) {
	s, err := New(Config{CapacityBytes: 1000})
	require.NoError(t, err)
	require.Equal(t, 0.95, s.Config().HighWatermark)
	require.Equal(t, 0.05, s.Config().EvictionRatio)
	require.Equal(t, int64(950), s.limit)
	for _, c := range []Config{{}, {CapacityBytes: 1, HighWatermark: 1.5}, {CapacityBytes: 1, EvictionRatio: -1}} {
		_, err := New(c)
		require.Error(t, err)
	}
}

// Capacity 1,000 bytes, 100-byte blocks: the watermark is 950 bytes.
// Nine puts take 900; the tenth takes 1,000 > 950, so one round evicts
// ⌈0.05 × 10⌉ = 1 object, the least recently used: block 1 (a get of block
// 2 kept it). With a ratio of 0.25 the round evicts ⌈2.5⌉ = 3.
func TestWatermarkEvictsTheLeastRecentlyUsed(t *testing.T) {
	s, err := New(Config{CapacityBytes: 1000})
	require.NoError(t, err)
	for k := uint64(1); k <= 9; k++ {
		require.True(t, s.Put(k, 100))
	}
	require.Equal(t, int64(900), s.Stats().UsedBytes)
	require.True(t, s.Get(1))
	require.True(t, s.Put(10, 100))
	st := s.Stats()
	require.Equal(t, int64(900), st.UsedBytes)
	require.Equal(t, int64(1000), st.PeakBytes)
	require.Equal(t, int64(1), st.Evictions)
	require.Equal(t, int64(1), st.Evicted)
	require.False(t, s.Has(2))
	require.Equal(t, []uint64{3, 4, 5, 6, 7, 8, 9, 1, 10}, keys(s))

	s, _ = New(Config{CapacityBytes: 1000, EvictionRatio: 0.25})
	for k := uint64(1); k <= 10; k++ {
		s.Put(k, 100)
	}
	require.Equal(t, []uint64{4, 5, 6, 7, 8, 9, 10}, keys(s))
	require.Equal(t, int64(700), s.Stats().UsedBytes)
	require.Equal(t, int64(300), s.Stats().EvictedBytes)
}

// A put the free space cannot take evicts rounds until it fits: at 900 of
// 1,000 bytes with watermark 1 (no thread round), a 300-byte put evicts
// one 100-byte object per round (⌈0.05 × 9⌉ = 1, then ⌈0.05 × 8⌉ = 1):
// two rounds, to 700 + 300 = 1,000.
func TestAPutThatDoesNotFitEvicts(t *testing.T) {
	s, _ := New(Config{CapacityBytes: 1000, HighWatermark: 1})
	for k := uint64(1); k <= 9; k++ {
		s.Put(k, 100)
	}
	require.True(t, s.Put(100, 300))
	require.Equal(t, int64(1000), s.Stats().UsedBytes)
	require.Equal(t, int64(2), s.Stats().Evictions)
	require.Equal(t, []uint64{3, 4, 5, 6, 7, 8, 9, 100}, keys(s))
	require.False(t, s.Put(200, 1001))
	require.Equal(t, int64(1), s.Stats().RejectedPuts)
	require.True(t, s.Put(3, 100)) // a duplicate refreshes recency
	require.Equal(t, int64(1), s.Stats().DuplicatePuts)
	require.Equal(t, []uint64{4, 5, 6, 7, 8, 9, 100, 3}, keys(s))
	require.False(t, s.Get(1))
	require.Equal(t, int64(1), s.Stats().MissedGets)
}

// Apply executes operations in (time, source, sequence) order, whatever
// order they were handed in, and keeps those after now.
func TestApplyOrderIsFixed(t *testing.T) {
	ops := []Op{
		{AtUs: 30, Src: 0, Seq: 0, Kind: OpPut, Key: 3, Bytes: 100},
		{AtUs: 10, Src: 1, Seq: 0, Kind: OpPut, Key: 1, Bytes: 100},
		{AtUs: 10, Src: 0, Seq: 1, Kind: OpPut, Key: 2, Bytes: 100},
		{AtUs: 20, Src: 1, Seq: 1, Kind: OpGet, Key: 2},
		{AtUs: 50, Src: 0, Seq: 2, Kind: OpPut, Key: 5, Bytes: 100},
	}
	for trial := 0; trial < 20; trial++ {
		s, _ := New(Config{CapacityBytes: 1 << 20})
		o := append([]Op(nil), ops...)
		rand.New(rand.NewPCG(uint64(trial), 1)).Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
		later := s.Apply(o, 30)
		require.Len(t, later, 1)
		require.Equal(t, uint64(5), later[0].Key)
		require.Equal(t, []uint64{1, 2, 3}, keys(s))
	}
}

// A randomized check: the usage is the sum of the objects' sizes and never
// exceeds the capacity.
func TestRandomizedAccounting(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	s, _ := New(Config{CapacityBytes: 10_000})
	for i := 0; i < 20_000; i++ {
		k := uint64(rng.IntN(400))
		if rng.IntN(3) == 0 {
			s.Get(k)
		} else {
			s.Put(k, int64(1+rng.IntN(300)))
		}
		var sum int64
		var objs int64
		for n := s.lru.Back(); n >= 0; n = s.lru.Prev(n) {
			sum += s.lru.At(n).bytes
			objs++
			require.True(t, s.Has(s.lru.At(n).key))
		}
		st := s.Stats()
		require.Equal(t, sum, st.UsedBytes)
		require.LessOrEqual(t, st.UsedBytes, int64(10_000))
		require.Equal(t, objs, st.Objects)
	}
}
