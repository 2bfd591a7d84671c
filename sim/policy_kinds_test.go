package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/blis-sim/blis/physics"
	"github.com/stretchr/testify/require"
)

func TestParsePriorityKinds(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind PriorityKind
	}{
		{"constant", PriorityConstant},
		{"slo-based", PrioritySLOBased},
		{"inverted-slo", PriorityInvertedSLO},
		{"tenant-priority", PriorityTenant},
		{"deadline-aware", PriorityDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParsePriority(tc.name)
			require.NoError(t, err)
			require.Equal(t, tc.kind, k)
			require.Equal(t, tc.name, k.String())
		})
	}
	// The existing kinds keep their numbers; the new ones follow.
	require.Equal(t, []PriorityKind{0, 1, 2, 3, 4}, []PriorityKind{PriorityConstant, PrioritySLOBased, PriorityInvertedSLO, PriorityTenant, PriorityDeadline})
	_, err := ParsePriority("edf")
	require.ErrorContains(t, err, "tenant-priority, deadline-aware")
	require.Equal(t, "priority(9)", PriorityKind(9).String())
}

func TestPriorityScores(t *testing.T) {
	classes := [4]float64{50, 100, 50, 10}
	deadlines := [4]int64{2_000_000, 500_000, 1_000_000, 10_000_000}
	tenants := []float64{5, 7}
	// Priority 2, arrived at 1 s; Base 1; scored at 3 s (age 2 s).
	spec := func(class SLOClass, tenant int32) RequestSpec {
		return RequestSpec{ID: 1, ArrivalUs: 1_000_000, PromptTokens: 1, OutputTokens: 1, Priority: 2, SLOClass: class, Tenant: tenant}
	}
	for _, tc := range []struct {
		name string
		pol  PriorityPolicy
		spec RequestSpec
		want float64
	}{
		{"constant", PriorityPolicy{Base: 1, AgeWeight: 0.5, ClassScore: classes}, spec(SLORealtime, 1), 3},
		{"slo-based/no-tables", PriorityPolicy{Kind: PrioritySLOBased, Base: 1, AgeWeight: 0.5}, spec(SLORealtime, 0), 4},
		{"slo-based/realtime", PriorityPolicy{Kind: PrioritySLOBased, Base: 1, AgeWeight: 0.5, ClassScore: classes}, spec(SLORealtime, 0), 104},
		{"slo-based/batch", PriorityPolicy{Kind: PrioritySLOBased, Base: 1, AgeWeight: 0.5, ClassScore: classes}, spec(SLOBatch, 0), 14},
		{"slo-based/none", PriorityPolicy{Kind: PrioritySLOBased, Base: 1, AgeWeight: 0.5, ClassScore: classes}, spec(SLONone, 0), 54},
		{"slo-based/class-out-of-range", PriorityPolicy{Kind: PrioritySLOBased, Base: 1, AgeWeight: 0.5, ClassScore: classes}, spec(7, 0), 54},
		{"inverted-slo/realtime", PriorityPolicy{Kind: PriorityInvertedSLO, Base: 1, AgeWeight: 0.5, ClassScore: classes}, spec(SLORealtime, 0), -98},
		{"inverted-slo/class-out-of-range", PriorityPolicy{Kind: PriorityInvertedSLO, Base: 1, AgeWeight: 0.5, ClassScore: classes}, spec(200, 0), -48},
		{"tenant-priority/in-table", PriorityPolicy{Kind: PriorityTenant, Base: 1, AgeWeight: 0.5, TenantScore: tenants, DefaultTenantScore: -4}, spec(SLORealtime, 1), 10},
		{"tenant-priority/beyond", PriorityPolicy{Kind: PriorityTenant, Base: 1, TenantScore: tenants, DefaultTenantScore: -4}, spec(SLONone, 2), -1},
		{"tenant-priority/negative", PriorityPolicy{Kind: PriorityTenant, Base: 1, TenantScore: tenants, DefaultTenantScore: -4}, spec(SLONone, -1), -1},
		{"tenant-priority/no-table", PriorityPolicy{Kind: PriorityTenant, Base: 1, DefaultTenantScore: 6}, spec(SLONone, 0), 9},
		// Deadline 1 s + 0.5 s: 3 − 1.5.
		{"deadline-aware/realtime", PriorityPolicy{Kind: PriorityDeadline, Base: 1, AgeWeight: 0.5, DeadlineUs: deadlines}, spec(SLORealtime, 0), 1.5},
		{"deadline-aware/batch", PriorityPolicy{Kind: PriorityDeadline, Base: 1, DeadlineUs: deadlines}, spec(SLOBatch, 0), -8},
		{"deadline-aware/none", PriorityPolicy{Kind: PriorityDeadline, Base: 1, DeadlineUs: deadlines}, spec(SLONone, 0), 0},
		{"deadline-aware/class-out-of-range", PriorityPolicy{Kind: PriorityDeadline, Base: 1, DeadlineUs: deadlines}, spec(9, 0), 0},
		{"deadline-aware/no-table", PriorityPolicy{Kind: PriorityDeadline, Base: 1}, spec(SLOBatch, 0), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, tc.pol.Score(&tc.spec, 3_000_000), 1e-9)
			require.NoError(t, tc.pol.Validate())
		})
	}
}

// TestPriorityScoreUnchangedForExistingKinds: with the new tables at
// their zero values, the old kinds' scores are bit for bit what they were.
func TestPriorityScoreUnchangedForExistingKinds(t *testing.T) {
	old := func(p PriorityPolicy, spec *RequestSpec, nowUs int64) float64 {
		base := p.Base + float64(spec.Priority)
		age := float64(nowUs-spec.ArrivalUs) * 1e-6
		switch p.Kind {
		case PrioritySLOBased:
			return base + p.AgeWeight*age
		case PriorityInvertedSLO:
			return base - p.AgeWeight*age
		}
		return base
	}
	r := rand.New(rand.NewPCG(7, 7))
	for range 10_000 {
		p := PriorityPolicy{Kind: PriorityKind(r.IntN(3)), Base: r.NormFloat64() * 100, AgeWeight: r.ExpFloat64()}
		if r.IntN(8) == 0 {
			p.Base = 0
		}
		s := RequestSpec{ArrivalUs: r.Int64N(1 << 40), Priority: int32(r.IntN(7) - 3), SLOClass: SLOClass(r.IntN(4)), Tenant: int32(r.IntN(4))}
		now := s.ArrivalUs + r.Int64N(1<<36)
		if r.IntN(2) == 0 {
			now = 0
		}
		require.Equal(t, math.Float64bits(old(p, &s, now)), math.Float64bits(p.Score(&s, now)), "%+v %+v at %d", p, s, now)
	}
}

// TestPriorityScoreShiftIsCommon is the invariant the keyed queue relies
// on (sortKey): a score at any time is its value at time 0 plus a shift
// that is the same for every request.
func TestPriorityScoreShiftIsCommon(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for kind := range PriorityKind(len(priorityNames)) {
		t.Run(kind.String(), func(t *testing.T) {
			p := PriorityPolicy{Kind: kind, Base: 3, AgeWeight: 2, ClassScore: [4]float64{50, 100, 50, 10},
				TenantScore: []float64{1, 20, 5}, DefaultTenantScore: 2, DeadlineUs: [4]int64{3e6, 1e6, 2e6, 60e6}}
			for range 200 {
				now := r.Int64N(1e10)
				var shift float64
				for i := range 20 {
					s := RequestSpec{ArrivalUs: r.Int64N(1e9), Priority: int32(r.IntN(5)), SLOClass: SLOClass(r.IntN(4)), Tenant: int32(r.IntN(5))}
					d := p.Score(&s, now) - p.Score(&s, 0)
					if i == 0 {
						shift = d
					}
					require.InDelta(t, shift, d, 1e-6)
				}
			}
		})
	}
}

func TestPriorityScoreDoesNotAllocate(t *testing.T) {
	p := PriorityPolicy{Kind: PriorityTenant, TenantScore: []float64{1, 2}}
	s := RequestSpec{Tenant: 1, SLOClass: SLOBatch}
	var sink float64
	for kind := range PriorityKind(len(priorityNames)) {
		p.Kind = kind
		require.Zero(t, testing.AllocsPerRun(100, func() { sink += p.Score(&s, 5) }))
	}
	_ = sink
}

// TestPriorityKindsOrderTheQueue drives the engine: request 0 holds the
// single seat while 1..4 queue, and they are then admitted one at a time
// in the order their scores give.
func TestPriorityKindsOrderTheQueue(t *testing.T) {
	reqs := []RequestSpec{
		{ID: 0, ArrivalUs: 0, PromptTokens: 10, OutputTokens: 50},
		{ID: 1, ArrivalUs: 10, PromptTokens: 100, OutputTokens: 2, SLOClass: SLOBatch, Tenant: 0},
		{ID: 2, ArrivalUs: 20, PromptTokens: 100, OutputTokens: 2, SLOClass: SLOInteractive, Tenant: 1},
		{ID: 3, ArrivalUs: 30, PromptTokens: 100, OutputTokens: 2, SLOClass: SLORealtime, Tenant: 2},
		{ID: 4, ArrivalUs: 40, PromptTokens: 100, OutputTokens: 2, SLOClass: SLONone, Tenant: 5},
	}
	classes := [4]float64{50, 100, 50, 10}
	// Deadlines: 1 at 100,010 µs, 2 at 3,020, 3 at 1,030, 4 at 2,040.
	deadlines := [4]int64{2000, 1000, 3000, 100_000}
	tenants := []float64{0, 10, 5} // tenant 5 is beyond: the default, 7
	for _, tc := range []struct {
		name  string
		sched SchedulerPolicy
		prio  PriorityPolicy
		order []int64
	}{
		// Class first; equal classes (2 and 4, both 50) oldest first.
		{"slo-based", PriorityFCFS, PriorityPolicy{Kind: PrioritySLOBased, AgeWeight: 1, ClassScore: classes}, []int64{0, 3, 2, 4, 1}},
		// Class last; equal classes youngest first.
		{"inverted-slo", PriorityFCFS, PriorityPolicy{Kind: PriorityInvertedSLO, AgeWeight: 1, ClassScore: classes}, []int64{0, 1, 4, 2, 3}},
		{"tenant-priority", PriorityFCFS, PriorityPolicy{Kind: PriorityTenant, TenantScore: tenants, DefaultTenantScore: 7}, []int64{0, 2, 4, 3, 1}},
		{"tenant-priority/reverse", ReversePriority, PriorityPolicy{Kind: PriorityTenant, TenantScore: tenants, DefaultTenantScore: 7}, []int64{0, 1, 3, 4, 2}},
		// The realtime request (arrived at 30 µs, 1 ms budget) goes
		// before the batch request that arrived at 10 µs (100 ms budget).
		{"deadline-aware", PriorityFCFS, PriorityPolicy{Kind: PriorityDeadline, DeadlineUs: deadlines}, []int64{0, 3, 4, 2, 1}},
		{"deadline-aware/reverse", ReversePriority, PriorityPolicy{Kind: PriorityDeadline, DeadlineUs: deadlines}, []int64{0, 1, 2, 4, 3}},
		// Without tables every request ties: arrival order.
		{"tenant-priority/zero", PriorityFCFS, PriorityPolicy{Kind: PriorityTenant}, []int64{0, 1, 2, 3, 4}},
		{"deadline-aware/zero", PriorityFCFS, PriorityPolicy{Kind: PriorityDeadline}, []int64{0, 1, 2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Engine.MaxNumSeqs = 1
			cfg.Policies.Scheduler, cfg.Policies.Priority = tc.sched, tc.prio
			rec := &recorder{}
			cfg.Observer = rec
			res := run(t, cfg, reqs)
			require.Equal(t, int64(len(reqs)), res.Requests.Completed)
			require.Equal(t, tc.order, rec.firstScheduleOrder())
		})
	}
}

// TestDeadlineTradesAgainstPriority: a deadline-aware score is in seconds,
// so a static priority of 1 is worth a deadline 1 s later.
func TestDeadlineTradesAgainstPriority(t *testing.T) {
	p := PriorityPolicy{Kind: PriorityDeadline, DeadlineUs: [4]int64{0, 0, 0, 2_000_000}}
	batch := RequestSpec{ArrivalUs: 0, SLOClass: SLOBatch, Priority: 3}
	plain := RequestSpec{ArrivalUs: 0}
	require.Greater(t, p.Score(&batch, 0), p.Score(&plain, 0))
	batch.Priority = 1
	require.Less(t, p.Score(&batch, 0), p.Score(&plain, 0))
}

func TestPriorityPolicyValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name  string
		pol   PriorityPolicy
		field string // "" when valid
		msg   string
	}{
		{"zero", PriorityPolicy{}, "", ""},
		{"full", PriorityPolicy{Kind: PriorityDeadline, Base: -3, AgeWeight: 1, ClassScore: [4]float64{-5, 100, 50, 10},
			TenantScore: []float64{-1e300, 1e300}, DefaultTenantScore: -2, DeadlineUs: [4]int64{0, 1, MaxDurationUs, 5}}, "", ""},
		{"class-nan", PriorityPolicy{ClassScore: [4]float64{0, 0, nan, 0}}, "class_score", "interactive must be finite, got NaN"},
		{"class-inf", PriorityPolicy{ClassScore: [4]float64{-inf, 0, 0, 0}}, "class_score", "no class must be finite, got -Inf"},
		{"tenant-inf", PriorityPolicy{TenantScore: []float64{1, inf}}, "tenant_score", "tenant 1 must be finite, got +Inf"},
		{"tenant-nan", PriorityPolicy{Kind: PriorityTenant, TenantScore: []float64{nan}}, "tenant_score", "tenant 0"},
		{"default-tenant-nan", PriorityPolicy{DefaultTenantScore: nan}, "default_tenant_score", "must be finite, got NaN"},
		{"default-tenant-inf", PriorityPolicy{DefaultTenantScore: -inf}, "default_tenant_score", "got -Inf"},
		{"deadline-negative", PriorityPolicy{DeadlineUs: [4]int64{0, -1, 0, 0}}, "deadline_us", "realtime must be in [0, 1099511627776] µs, got -1"},
		{"deadline-too-long", PriorityPolicy{DeadlineUs: [4]int64{0, 0, 0, MaxDurationUs + 1}}, "deadline_us", "batch"},
		// The old checks come first, unchanged.
		{"age-weight", PriorityPolicy{AgeWeight: -1, ClassScore: [4]float64{nan}}, "priority_age_weight", ""},
		{"base", PriorityPolicy{Base: inf}, "priority_base", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.pol.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var fe *physics.FieldError
			require.True(t, errors.As(err, &fe), "%v", err)
			require.Equal(t, tc.field, fe.Field)
			require.Contains(t, fe.Msg, tc.msg)
			// A configuration with it is refused.
			cfg := baseConfig()
			cfg.Policies.Priority = tc.pol
			_, err = NewEngine(cfg)
			require.ErrorAs(t, err, &fe)
		})
	}
}

// TestPriorityKindsAgreeWithSortedScores runs a larger random queue under
// each new kind and checks that the admission order of the queued
// requests is their scores' order (priority-fcfs: highest first, then
// arrival).
func TestPriorityKindsAgreeWithSortedScores(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 2))
	n := 60
	reqs := make([]RequestSpec, n)
	reqs[0] = RequestSpec{ID: 0, PromptTokens: 10, OutputTokens: 400}
	for i := 1; i < n; i++ {
		reqs[i] = RequestSpec{ID: int64(i), ArrivalUs: int64(i) * 3, PromptTokens: 20, OutputTokens: 1,
			Priority: int32(r.IntN(3)), SLOClass: SLOClass(r.IntN(4)), Tenant: int32(r.IntN(6))}
	}
	for _, p := range []PriorityPolicy{
		{Kind: PriorityTenant, TenantScore: []float64{3, 0, 1.5, -2}, DefaultTenantScore: 0.5},
		{Kind: PriorityDeadline, DeadlineUs: [4]int64{900_000, 100_000, 500_000, 5_000_000}},
		{Kind: PrioritySLOBased, AgeWeight: 1, ClassScore: [4]float64{50, 100, 50, 10}},
	} {
		t.Run(p.Kind.String(), func(t *testing.T) {
			cfg := baseConfig()
			cfg.Engine.MaxNumSeqs = 1
			cfg.Policies.Scheduler, cfg.Policies.Priority = PriorityFCFS, p
			rec := &recorder{}
			cfg.Observer = rec
			run(t, cfg, reqs)
			want := make([]int64, 0, n-1)
			for i := 1; i < n; i++ {
				want = append(want, int64(i))
			}
			slices.SortStableFunc(want, func(a, b int64) int {
				sa, sb := p.Score(&reqs[a], 0), p.Score(&reqs[b], 0)
				switch {
				case sa > sb:
					return -1
				case sa < sb:
					return 1
				}
				return 0
			})
			require.Equal(t, append([]int64{0}, want...), rec.firstScheduleOrder(), fmt.Sprint(p))
		})
	}
}
