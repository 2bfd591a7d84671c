package sim

import (
	"errors"
	"fmt"
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
// advances the whole group to the same time, takes the group's duration,
// the largest plan or an idle rank's dummy batch, and calls CommitStep on
// every member: a member with a plan applies its batch over the group's
// duration, a member without one runs a dummy batch. No step of a member
// starts before the group's step ends, and a request handed to a member
// while the group steps waits for that end, as the engine core drains its
// input between steps.
type lockstep struct {
	planned   bool
	preempted int64 // the plan's preemptions
	dt        int64 // the plan's own duration, µs
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
	e.lock = &lockstep{dummyUs: dt}
	return nil
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
	case atUs != e.now || dtUs < l.dt:
		return fmt.Errorf("sim: CommitStep: the plan is a step of %d µs at %d µs, got %d µs at %d µs", l.dt, e.now, dtUs, atUs)
	}
	l.planned = false
	l.waitUs += dtUs - l.dt
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
	l.planned, l.preempted, l.dt = true, preempted, dt
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
	// than the engine's batch alone would take: waiting for a slower rank.
	WaitMs float64 `json:"wait_ms"`
	// DummySteps counts the dummy batches the engine ran while another
	// rank had work and it had none.
	DummySteps int64 `json:"dummy_steps"`
}
