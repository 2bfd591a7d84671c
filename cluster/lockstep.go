package cluster

import (
	"fmt"
	"slices"

	"github.com/blis-sim/blis/sim"
)

// Data-parallel lockstep (sim/lockstep.go has the mechanism and its
// source): the instances of one data-parallel group of a mixture-of-experts
// model start each step together and the step lasts as long as the
// slowest's; while any has work, the others run dummy batches. The cluster
// advances a group as one unit: every member with an event at the time,
// then the group's step, committed on every member. Runs with a group
// advance on one goroutine.

// joinGroup puts instance i in the group named name (none when empty).
func (c *Sim) joinGroup(i int, name string) error {
	if name == "" {
		if c.groupOf != nil {
			c.groupOf = append(c.groupOf, -1)
		}
		return nil
	}
	if c.groupOf == nil {
		c.groupOf = slices.Repeat([]int32{-1}, i)
	}
	if err := c.eng[i].SetLockstep(); err != nil {
		return fmt.Errorf("instance %s: %w", c.ids[i], err)
	}
	g := slices.IndexFunc(c.groups, func(m []int) bool { return c.cfg.Instances[m[0]].Lockstep == name })
	if g < 0 {
		c.groups = append(c.groups, nil)
		g = len(c.groups) - 1
	}
	c.groups[g] = append(c.groups[g], i)
	c.groupOf = append(c.groupOf, int32(g))
	return nil
}

// advanceGroup processes the events of the group's members at the
// current time, then, if any member planned a step, commits the group's
// step on every member: the longest of the members' parts at the group's
// shape (a plan, or an idle member's dummy batch; sim.GroupShape).
func (c *Sim) advanceGroup(members []int) {
	t := c.now
	for _, m := range members {
		e := c.eng[m]
		at, ok := e.NextEventUs()
		if !ok || at != t {
			continue
		}
		if err := e.Advance(); err != nil {
			c.err = fmt.Errorf("instance %s: %w", c.ids[m], err)
			return
		}
		for k := range e.Completions() {
			c.complete(m, &e.Completions()[k], c.now)
		}
	}
	planned := false
	var g sim.GroupShape
	for _, m := range members {
		_, ok := c.eng[m].PlannedStepUs()
		planned = planned || ok
		g.Add(c.eng[m].GroupTokens())
	}
	if planned {
		var dt int64
		for _, m := range members {
			dt = max(dt, c.eng[m].GroupStepUs(g))
		}
		for _, m := range members {
			e := c.eng[m]
			_, real := e.PlannedStepUs()
			if err := e.CommitStep(t, dt); err != nil {
				c.err = fmt.Errorf("instance %s: %w", c.ids[m], err)
				return
			}
			if real {
				for k := range e.Completions() {
					c.complete(m, &e.Completions()[k], c.now)
				}
			}
		}
	}
	for _, m := range members {
		at, ok := c.eng[m].NextEventUs()
		c.inst.set(m, at, ok)
	}
}
