package kvxfer

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/internal/units"
)

// run completes every transfer and returns when each completed.
func run(t *testing.T, n *Network) map[int64]int64 {
	t.Helper()
	at := map[int64]int64{}
	for {
		next, ok := n.Next()
		if !ok {
			return at
		}
		done, err := n.Complete(next)
		require.NoError(t, err)
		require.NotEmpty(t, done, "Next said %d", next)
		for _, id := range done {
			at[id] = next
		}
	}
}

// TestLlama8BPrompt is the hand-computed case: Llama-3.1-8B at TP 1
// holds 128 KiB of KV per token (32 layers × 8 KV heads × 128 × K and V ×
// 2 bytes), so a 2,000-token prompt is 262,144,000 bytes: 26,214.4 µs at
// 10 GB/s, rounded up to 26,215, plus the base latency.
func TestLlama8BPrompt(t *testing.T) {
	n, err := New(100)
	require.NoError(t, err)
	link, err := n.AddPort(10e9)
	require.NoError(t, err)
	require.NoError(t, n.Start(0, 7, 2000*32*8*128*2*2, link, -1))
	next, ok := n.Next()
	require.True(t, ok)
	require.Equal(t, int64(26_215+100), next)
	require.Equal(t, map[int64]int64{7: 26_315}, run(t, n))
}

// TestOverlapHalvesTheRate: two 100 MB transfers on one 10 GB/s port, the
// second starting at 5 ms: the first moves 50 MB alone, then both run at
// half rate for exactly their overlap (the first's last 50 MB, 10 ms),
// then the second finishes alone. Each takes 5 ms longer than alone.
func TestOverlapHalvesTheRate(t *testing.T) {
	n, err := New(0)
	require.NoError(t, err)
	link, err := n.AddPort(10e9)
	require.NoError(t, err)
	require.NoError(t, n.Start(0, 1, 100e6, link, -1))
	require.NoError(t, n.Start(5000, 2, 100e6, link, link))
	require.Equal(t, 2, n.Flowing(link))
	require.Equal(t, map[int64]int64{1: 15_000, 2: 20_000}, run(t, n))
	require.Equal(t, 0, n.Flowing(link))
}

// TestSmallestShare: a transfer flows at its tightest port's share, and a
// transfer that ends frees its share for the others at once.
func TestSmallestShare(t *testing.T) {
	n, err := New(0)
	require.NoError(t, err)
	nic, _ := n.AddPort(10e9) // the sender's NIC, shared
	slow, _ := n.AddPort(2e9) // one receiver's NIC
	fast, _ := n.AddPort(50e9)
	// A: nic (5 GB/s share) and slow (2 GB/s): 2 GB/s. B: nic and fast:
	// 5 GB/s share of nic. 20 MB for B: 4,000 µs; A's 20 MB: 10,000 µs
	// (B leaving does not raise A above its slow port).
	require.NoError(t, n.Start(0, 1, 20e6, nic, slow))
	require.NoError(t, n.Start(0, 2, 20e6, nic, fast))
	require.Equal(t, map[int64]int64{1: 10_000, 2: 4_000}, run(t, n))
	// Alone on nic and fast: 10 GB/s.
	require.NoError(t, n.Start(10_000, 3, 20e6, nic, fast))
	require.Equal(t, map[int64]int64{3: 12_000}, run(t, n))
}

func TestZeroBytesTakeTheLatency(t *testing.T) {
	n, err := New(250)
	require.NoError(t, err)
	p, _ := n.AddPort(1e9)
	require.NoError(t, n.Start(1000, 4, 0, p, -1))
	require.Equal(t, 0, n.Flowing(p))
	require.Equal(t, map[int64]int64{4: 1250}, run(t, n))
}

func TestErrors(t *testing.T) {
	_, err := New(-1)
	require.Error(t, err)
	n, _ := New(0)
	for _, bw := range []float64{0, -1, math.Inf(1), math.NaN()} {
		_, err := n.AddPort(bw)
		require.Error(t, err, "%v", bw)
	}
	p, _ := n.AddPort(1e9)
	require.Error(t, n.Start(0, 1, -5, p, -1))
	require.Error(t, n.Start(0, 1, math.NaN(), p, -1))
	require.Error(t, n.Start(0, 1, 10, 3, -1), "no port 3")
	require.NoError(t, n.Start(100, 1, 10, p, -1))
	require.Error(t, n.Start(50, 2, 10, p, -1), "before the clock")
	_, err = n.Complete(10)
	require.Error(t, err)
}

// TestRandomTransfersConserveWork: with random starts and sizes on shared
// ports, every transfer completes exactly once, never sooner than alone
// on its tightest port, and a port never carries more than its bandwidth
// allows over the run (a port's bytes fit its capacity times the time it
// was busy, from its first start to its last end).
func TestRandomTransfersConserveWork(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		n, _ := New(int64(rng.IntN(200)))
		var caps []float64
		for range 4 {
			c := 1e9 * float64(1+rng.IntN(50))
			p, _ := n.AddPort(c)
			caps = append(caps, c/1e6)
			_ = p
		}
		type tr struct {
			start int64
			bytes float64
			ports [2]Port
		}
		var trs []tr
		at := map[int64]int64{}
		now := int64(0)
		for id := range 60 {
			now += int64(rng.IntN(3000))
			// Complete what ends before this start.
			for {
				next, ok := n.Next()
				if !ok || next > now {
					break
				}
				done, err := n.Complete(next)
				require.NoError(t, err)
				for _, d := range done {
					_, dup := at[d]
					require.False(t, dup, "transfer %d completed twice", d)
					at[d] = next
				}
			}
			a, b := Port(rng.IntN(4)), Port(rng.IntN(5)-1)
			x := tr{start: now, bytes: float64(rng.IntN(50e6)), ports: [2]Port{a, b}}
			require.NoError(t, n.Start(now, int64(id), x.bytes, a, b))
			trs = append(trs, x)
		}
		for id, f := range run(t, n) {
			at[id] = f
		}
		require.Len(t, at, len(trs), "seed %d", seed)
		for id, x := range trs {
			tight := caps[x.ports[0]]
			if x.ports[1] >= 0 {
				tight = min(tight, caps[x.ports[1]])
			}
			alone := x.start + int64(math.Ceil(x.bytes/tight-1e-6)) + n.latencyUs
			require.GreaterOrEqual(t, at[int64(id)], alone, "seed %d transfer %d", seed, id)
		}
		for p := range caps {
			var bytes float64
			first, last, k := int64(math.MaxInt64), int64(0), 0
			for id, x := range trs {
				if x.ports[0] == Port(p) || x.ports[1] == Port(p) {
					bytes += x.bytes
					first, last, k = min(first, x.start), max(last, at[int64(id)]-n.latencyUs), k+1
				}
			}
			if k > 0 { // each end is rounded up by less than a µs
				require.LessOrEqual(t, bytes, caps[p]*float64(last-first+int64(k)), "seed %d port %d", seed, p)
			}
		}
	}
}

// TestHopelessLinkIsClamped: a 512 MB transfer over a 1e-15 GB/s link
// (1e-6 bytes/s: 5e14 s) once ended at a wrapped time, 9.2e18 µs before it
// started; its flow is now cut to units.MaxDurationUs from its start and
// counted (however the other transfers change its rate meanwhile), and a
// transfer sharing a port with it keeps its fair share until then.
func TestHopelessLinkIsClamped(t *testing.T) {
	n, err := New(10)
	require.NoError(t, err)
	slow, err := n.AddPort(1e-15 * 1e9)
	require.NoError(t, err)
	subnormal, err := n.AddPort(1e-300 * 1e-15)
	require.NoError(t, err)
	fast, err := n.AddPort(10e9)
	require.NoError(t, err)
	require.NoError(t, n.Start(1000, 1, 512e6, slow, fast))
	require.NoError(t, n.Start(1000, 2, 512e6, subnormal, -1))
	require.NoError(t, n.Start(1000, 3, 100e6, fast, -1))
	require.Equal(t, int64(2), n.Clamped())
	got := run(t, n)
	require.Equal(t, 1000+units.MaxDurationUs+10, got[1])
	require.Equal(t, 1000+units.MaxDurationUs+10, got[2])
	// 100 MB at 10 GB/s, the fast port shared with the hopeless transfer
	// at half rate: 20 ms.
	require.Equal(t, int64(1000+20_000+10), got[3])
	require.Equal(t, int64(2), n.Clamped(), "counted once each")
	_, err = New(units.MaxDurationUs + 1)
	require.Error(t, err)
}
