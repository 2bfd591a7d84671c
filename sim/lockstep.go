package sim

import (
	"errors"
	"fmt"

	"github.com/blis-sim/blis/internal/units"
)

// Data-parallel lockstep. The engines of a data-parallel group serving a
// mixture-of-experts model are not independent: the expert layers
// synchronize every rank in every forward pass, so forward passes are
// aligned, and while any rank has requests the ranks without run empty
// "dummy" forward passes (vLLM, docs/serving/data_parallel_deployment.md:
// "Forward passes must be aligned ... even when there are fewer requests
// to be processed than DP ranks"; vllm/v1/engine/core.py,
// DPEngineCoreProc's execute_dummy_batch). A group therefore steps as
// one: its steps start together and each lasts as long as its slowest
// rank's.
//
// An engine in lockstep runs its steps in two phases. Advance composes the
// batch and prices it (the plan) but applies nothing; the caller, who
// advances the whole group to the same time, takes the group's shape
// (GroupShape: each member's tokens, GroupTokens), prices every member's
// part at it (GroupStepUs), takes the longest as the group's duration and
// calls CommitStep on every member: a member with a plan applies its batch
// over the group's duration, a member without one runs a dummy batch. No
// step of a member starts before the group's step ends, and a request
// handed to a member while the group steps waits for that end, as the
// engine core drains its input between steps.
//
// The group's shape prices what one rank's batch alone cannot say. With
// CUDA graphs (vLLM's default) every rank pads its forward pass to the
// most tokens any rank runs, an idle rank's dummy batch too
// (vllm/v1/worker/dp_utils.py, coordinate_batch_across_dp and
// _post_process_dp_padding: "ensure that each rank is processing the same
// number of tokens", on when cudagraph_mode is not NONE in
// gpu_model_runner; execute_dummy_batch runs a one-token _dummy_run, padded
// the same way), and before each MoE layer the ranks all-gather every
// rank's hidden states and router logits and reduce-scatter the outputs
// after it (vLLM's default all2all_backend, allgather_reducescatter:
// AgRsAll2AllManager in vllm/distributed/device_communicators/all2all.py),
// so each rank's experts process the whole group's tokens. The padded rows
// go through every GEMM, elementwise kernel and collective but not
// attention, whose work stays each rank's own; since every layer
// synchronizes at its all-gather, the group's step is the slowest rank's
// (per layer, and so over the step when the layers are alike).
type lockstep struct {
	planned   bool
	preempted int64 // the plan's preemptions
	dt        int64 // the plan's own duration, µs
	// floor is the shortest group step the plan may be committed over:
	// its own duration, or its part at the group's shape (GroupStepUs).
	floor int64
	// dummy is the dummy batch: one decode token with one of context.
	dummy Batch
	// end is when this member's part in the group's current or last step
	// ends: the plan's own end until the group commits, the group's end
	// after.
	end int64
	// dummyUs is the duration of a one-token dummy batch on this engine.
	dummyUs int64
	// waitUs sums, over this member's real steps, the group's duration
	// less its own: the time its batches waited for slower ranks.
	waitUs, dummySteps int64
}

// SetLockstep puts the engine in lockstep with the other engines of its
// data-parallel group (see above). It must be called before the engine
// receives any request. It prices the dummy batch, one decode token with
// one token of context, once through the latency model.
func (e *Engine) SetLockstep() error {
	if e.hasArrival || e.events.len() > 0 || e.stepID > 0 {
		return errors.New("sim: SetLockstep after the engine received a request")
	}
	var b Batch
	b.Beta.ScheduledTokens, b.Beta.NumDecodeReqs, b.Beta.DecodeContextTokens = 1, 1, 1
	b.Beta.SumDecodeKVBlocks = 1
	dt := max(1, min(e.cfg.Latency.StepTimeUs(&b), MaxDurationUs))
	e.lock = &lockstep{dummyUs: dt, dummy: b}
	return nil
}

// GroupShape is a data-parallel group's step as its members' forward
// passes see it: each member's tokens, the planned batch's scheduled
// tokens or the dummy batch's one (Engine.GroupTokens).
type GroupShape struct {
	// Members is the number of engines in the group.
	Members int
	// MaxTokens is the most tokens of any member, SumTokens their sum.
	MaxTokens, SumTokens int64
}

// Add counts a member with tokens tokens.
func (g *GroupShape) Add(tokens int64) {
	g.Members++
	g.MaxTokens = max(g.MaxTokens, tokens)
	g.SumTokens += tokens
}

// GroupPricer is a latency model that prices a member's step at its
// group's shape (sim/lockstep.go says what the shape changes). A model
// that does not implement it prices each member's batch alone, and the
// group takes the longest.
type GroupPricer interface {
	// GroupStepDeltaUs is how much longer (negative: shorter) b's step
	// is at the group's shape g than StepTimeUs prices it alone.
	GroupStepDeltaUs(b *Batch, g GroupShape) int64
}

// groupPricer is m's GroupPricer, through the wrappers that only scale
// or delay its steps (noise, a slow start), whose factor the plan's own
// price already carries; nil when m does not price groups.
func groupPricer(m LatencyModel) GroupPricer {
	gp, _ := innermost(m).(GroupPricer)
	return gp
}

// GroupTokens is the tokens this member's forward pass runs in the group's
// next step before padding: the planned batch's, or the dummy batch's one
// when it planned none. 0 without lockstep.
func (e *Engine) GroupTokens() int64 {
	l := e.lock
	switch {
	case l == nil:
		return 0
	case l.planned:
		return e.batch.Beta.ScheduledTokens
	}
	return l.dummy.Beta.ScheduledTokens
}

// GroupStepUs is this member's part of the group's step of shape g, in
// µs: its plan, or its dummy batch when it planned none, priced alone and
// moved by what the latency model's GroupPricer says the group's shape
// adds (nothing when the model does not price groups), clamped to
// [1, MaxDurationUs]. A planned step is then committed over no less.
func (e *Engine) GroupStepUs(g GroupShape) int64 {
	l := e.lock
	if l == nil {
		return 0
	}
	b, dt := &l.dummy, l.dummyUs
	if l.planned {
		b, dt = &e.batch, l.dt
	}
	if gp := groupPricer(e.cfg.Latency); gp != nil {
		dt = units.Add(dt, gp.GroupStepDeltaUs(b, g))
	}
	dt = max(1, min(dt, MaxDurationUs))
	if l.planned {
		l.floor = dt
	}
	return dt
}

// InLockstep reports whether SetLockstep was called.
func (e *Engine) InLockstep() bool { return e.lock != nil }

// PlannedStepUs is the duration of the step the last Advance planned, and
// whether it planned one. Without lockstep it never does.
func (e *Engine) PlannedStepUs() (int64, bool) {
	if e.lock == nil || !e.lock.planned {
		return 0, false
	}
	return e.lock.dt, true
}

// DummyStepUs is the duration of this engine's dummy batch (0 without
// lockstep).
func (e *Engine) DummyStepUs() int64 {
	if e.lock == nil {
		return 0
	}
	return e.lock.dummyUs
}

// CommitStep ends the group's step that starts at atUs and lasts dtUs on
// this member: a member that planned a step (PlannedStepUs) at atUs applies
// it over dtUs, which must not be shorter than the plan; any other member
// runs a dummy batch for dtUs, during which nothing starts on it. It
// starts a new Completions list, as Advance does.
func (e *Engine) CommitStep(atUs, dtUs int64) (err error) {
	defer catch(&err)
	e.done = e.done[:0]
	l := e.lock
	switch {
	case l == nil:
		return errors.New("sim: CommitStep on an engine not in lockstep")
	case dtUs < 1 || dtUs > MaxDurationUs:
		return fmt.Errorf("sim: CommitStep: duration %d µs outside [1, %d]", dtUs, MaxDurationUs)
	case !l.planned:
		if atUs < e.now || atUs < l.end {
			return fmt.Errorf("sim: CommitStep: a dummy batch at %d µs overlaps the engine's clock %d µs or its last step's end %d µs", atUs, e.now, l.end)
		}
		l.dummySteps++
		l.end = atUs + dtUs
		return nil
	case atUs != e.now || dtUs < l.floor:
		return fmt.Errorf("sim: CommitStep: the plan is a step of %d µs at %d µs, got %d µs at %d µs", l.floor, e.now, dtUs, atUs)
	}
	l.planned = false
	l.waitUs += max(0, dtUs-l.dt)
	l.end = atUs + dtUs
	e.stepPending = false
	e.finishStep(l.preempted, dtUs)
	return nil
}

// plan keeps a composed batch for the group's commit. The engine counts as
// busy until at least its own step's end, and no other step is scheduled
// meanwhile.
func (e *Engine) plan(preempted, dt int64) {
	l := e.lock
	l.planned, l.preempted, l.dt, l.floor = true, preempted, dt, dt
	l.end = e.now + dt
	e.stepPending = true // CommitStep schedules the next one
}

// busyUntil is when the step running (a dummy batch too) ends: no step
// starts and no request joins the queue before.
func (e *Engine) busyUntil() int64 {
	if e.lock != nil {
		return max(e.m.lastStepEnd, e.lock.end)
	}
	return e.m.lastStepEnd
}

// LockstepResult is an engine's part in its data-parallel group's steps.
type LockstepResult struct {
	// WaitMs sums, over the engine's own steps, the time they were longer
	// than the engine's batch alone would take: waiting for a slower rank,
	// and the rows padded to the group's largest batch.
	WaitMs float64 `json:"wait_ms"`
	// DummySteps counts the dummy batches the engine ran while another
	// rank had work and it had none.
	DummySteps int64 `json:"dummy_steps"`
}
