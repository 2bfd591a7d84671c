package sim

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ctxWorkload is long enough (thousands of instants) for RunContext to
// look at its context many times.
func ctxWorkload() (Config, []RequestSpec) {
	cfg := baseConfig()
	cfg.Options.Exhaustive = false
	cfg.Options.RecordRequests = true
	cfg.Policies.Scheduler = PriorityFCFS
	return cfg, randomWorkload(rand.New(rand.NewPCG(5, 8)), 3000)
}

func runCtx(t *testing.T, cfg Config, reqs []RequestSpec, ctx context.Context) (*Sim, *Result, error) {
	t.Helper()
	s, err := New(cfg, reqs)
	require.NoError(t, err)
	res, err := s.RunContext(ctx)
	return s, res, err
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestRunContextUncancelledIsRun(t *testing.T) {
	cfg, reqs := ctxWorkload()
	want := mustJSON(t, run(t, cfg, reqs))
	cancelled, cancel := context.WithCancel(context.Background())
	defer cancel()
	later, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	for name, ctx := range map[string]context.Context{"background": context.Background(), "cancelable": cancelled, "timeout": later} {
		t.Run(name, func(t *testing.T) {
			_, res, err := runCtx(t, cfg, reqs, ctx)
			require.NoError(t, err)
			require.Equal(t, int64(len(reqs)), res.Requests.Completed)
			require.Equal(t, want, mustJSON(t, res))
		})
	}
}

func TestRunContextDoneBeforeStart(t *testing.T) {
	cfg, reqs := ctxWorkload()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithTimeout(context.Background(), -time.Second)
	defer cancel2()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
	}{
		{"canceled", cancelled, context.Canceled},
		{"deadline", expired, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, res, err := runCtx(t, cfg, reqs, tc.ctx)
			require.True(t, errors.Is(err, tc.err), "%v", err)
			require.NotNil(t, res)
			require.Equal(t, Counts{Offered: int64(len(reqs))}, res.Requests)
			require.Zero(t, res.Steps)
			require.Zero(t, s.Engine().Now())
		})
	}
}

// cancelSource cancels its context once n requests were taken from it.
type cancelSource struct {
	Source
	n      int
	taken  int
	cancel context.CancelFunc
}

func (c *cancelSource) Next() RequestSpec {
	c.taken++
	if c.taken == c.n {
		c.cancel()
	}
	return c.Source.Next()
}

func TestRunContextCancelledMidRun(t *testing.T) {
	cfg, reqs := ctxWorkload()
	for _, n := range []int{1, 500, 2000} {
		ctx, cancel := context.WithCancel(context.Background())
		src := &cancelSource{Source: SliceSource(reqs), n: n, cancel: cancel}
		s, err := NewStream(cfg, src)
		require.NoError(t, err)
		res, err := s.RunContext(ctx)
		cancel()
		require.ErrorIs(t, err, context.Canceled)
		require.NotNil(t, res)

		c := res.Requests
		require.Equal(t, int64(len(reqs)), c.Offered)
		// Stopped early: not every request arrived, and those that did
		// are each in exactly one place.
		require.Less(t, c.Injected, int64(len(reqs)))
		require.GreaterOrEqual(t, c.Injected, int64(n-1))
		t.Logf("n=%d: taken %d, injected %d, completed %d", n, src.taken, c.Injected, c.Completed)
		require.LessOrEqual(t, c.Injected, int64(src.taken))
		require.Equal(t, c.Injected, c.Completed+c.Dropped+c.RejectedTooLong+c.TimedOut+c.StillArrival+c.StillQueued+c.StillRunning)
		require.Equal(t, c.Completed, int64(len(res.PerRequest)))

		if n == 1 {
			// Cancelled while the first requests were injected: stopped
			// at the first look, before any instant.
			require.Equal(t, Counts{Offered: int64(len(reqs))}, c)
			require.Zero(t, s.Engine().Now())
			continue
		}
		// The stop is a horizon at the last instant processed.
		h := cfg
		h.Options.HorizonUs = s.Engine().Now()
		require.Positive(t, h.Options.HorizonUs)
		require.Equal(t, mustJSON(t, run(t, h, reqs)), mustJSON(t, res), "n=%d", n)
	}
}

// TestRunContextStopsBetweenInstants: cancelled from an observer in the
// middle of an instant, the run still completes that instant (and at most
// ctxCheckEvery of them) before it stops.
func TestRunContextStopsBetweenInstants(t *testing.T) {
	cfg, reqs := ctxWorkload()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs := &cancelObserver{recorder: &recorder{}, at: 100, cancel: cancel}
	cfg.Observer = obs
	s, err := New(cfg, reqs)
	require.NoError(t, err)
	res, err := s.RunContext(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Greater(t, obs.steps, int64(100))
	require.LessOrEqual(t, obs.steps, int64(100+ctxCheckEvery))
	require.Equal(t, obs.steps, res.Steps)
	// Every step's instant was finished: the engine's own end checks pass
	// (Finish returned no error) and no event at Now is left.
	at, ok := s.Engine().NextEventUs()
	require.True(t, ok)
	require.Greater(t, at, s.Engine().Now())
}

type cancelObserver struct {
	*recorder
	at, steps int64
	cancel    context.CancelFunc
}

func (o *cancelObserver) Step(*StepSummary, SnapshotSource) {
	o.steps++
	if o.steps == o.at {
		o.cancel()
	}
}
