package summary

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// focus is the Suggested focus section of the summary of res under ctx.
func focus(t *testing.T, ctx Context) string {
	t.Helper()
	s := Markdown(ctx, busyResult(), 1_000_000)
	_, f, ok := strings.Cut(s, "## Suggested focus\n")
	require.True(t, ok, s)
	return f
}

// A suggestion never recommends what the bundle already does: a run
// already ordered by SLO class (priority slo-based, scheduler
// priority-fcfs) is told to add capacity, not to order by class; a run
// with half of it is told the other half; tenant-quota admission is not
// told to admit by tenant; least-loaded routing is not told to weigh a
// scorer it does not have.
func TestSuggestionsLeaveOutWhatIsSet(t *testing.T) {
	set := Context{Admission: "tenant-quota", Priority: "slo-based", Routing: "least-loaded", Scheduler: "priority-fcfs", Autoscale: "none", Instances: 2}
	f := focus(t, set)
	require.NotContains(t, f, "serve it first (")
	require.NotContains(t, f, "Order the queue by SLO class")
	require.Contains(t, f, "already served first (priority slo-based, scheduler priority-fcfs): add capacity")
	require.NotContains(t, f, "admit by tenant")
	require.NotContains(t, f, "weigh the queue-depth scorer")
	require.Contains(t, f, "Routing least-loaded already picks the shortest queue")

	half := set
	half.Scheduler = "fcfs"
	f = focus(t, half)
	require.Contains(t, f, "scheduler priority-fcfs (priority slo-based is set, but the scheduler fcfs ignores it)")
	require.NotContains(t, f, "with priority slo-based")

	other := set
	other.Priority = "constant"
	f = focus(t, other)
	require.Contains(t, f, "priority slo-based (the scheduler priority-fcfs is set, but priority constant does not rank by class)")

	none := Context{Admission: "token-bucket", Priority: "constant", Routing: "weighted", Scheduler: "fcfs", Autoscale: "none", Instances: 2}
	f = focus(t, none)
	require.Contains(t, f, "serve it first (scheduler priority-fcfs with priority slo-based) or add capacity")
	require.Contains(t, f, "admit by tenant (tenant-quota)")
}
