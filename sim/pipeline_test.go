package sim

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/pipeline/*.txt with the timelines the code produces")

// pipelineConfig is one request per step budget, 10 ms steps, no API
// overheads: every time in a timeline is a multiple of the step or an
// arrival.
func pipelineConfig(async int, outDelay int64) Config {
	cfg := baseConfig()
	cfg.Latency = constModel{step: 10000}
	cfg.Engine.Pipeline = Pipeline{AsyncDepth: async, OutputDelayUs: outDelay}
	cfg.Options.RecordRequests = true
	return cfg
}

// The pipeline rules, each pinned by hand (docs/simulator.md, "Request
// pipeline"). Request 0 keeps the engine stepping from t=0; request 1
// arrives mid-step at 5 ms.
func TestPipelineRules(t *testing.T) {
	reqs := specs([3]int64{0, 100, 20}, [3]int64{5000, 100, 3})
	byID := func(res *Result, id int64) RequestRecord {
		for _, r := range res.PerRequest {
			if r.ID == id {
				return r
			}
		}
		t.Fatalf("request %d did not finish", id)
		return RequestRecord{}
	}

	sync := run(t, pipelineConfig(0, 0), reqs)
	async := run(t, pipelineConfig(1, 0), reqs)
	// Synchronous: queued at the boundary (10 ms), prefilled in the step
	// [10, 20) ms, first token at 20 ms: TTFT 15 ms.
	require.Equal(t, int64(5000), byID(sync, 1).SchedulingDelay)
	require.Equal(t, int64(15000), byID(sync, 1).TTFT)
	// Async depth 1: the step [10, 20) ms was composed at 0 ms, so the
	// request joins [20, 30) ms: exactly one step later.
	require.Equal(t, byID(sync, 1).TTFT+10000, byID(async, 1).TTFT)
	require.Equal(t, byID(sync, 1).SchedulingDelay+10000, byID(async, 1).SchedulingDelay)
	// Once running, tokens come one per step either way.
	require.Equal(t, int64(10000), byID(async, 1).MeanITLUs)
	require.Equal(t, byID(sync, 1).MeanITLUs, byID(async, 1).MeanITLUs)

	// An idle engine schedules a new request at once, async or not.
	solo := specs([3]int64{5000, 100, 3})
	for _, d := range []int{0, 1} {
		res := run(t, pipelineConfig(d, 0), solo)
		require.Equal(t, int64(0), res.PerRequest[0].SchedulingDelay, "async depth %d", d)
		require.Equal(t, int64(10000), res.PerRequest[0].TTFT, "async depth %d", d)
	}

	// The output delay moves TTFT and E2E by itself and nothing else.
	const delay = 2500
	late := run(t, pipelineConfig(1, delay), reqs)
	for id := int64(0); id < 2; id++ {
		a, b := byID(async, id), byID(late, id)
		require.Equal(t, a.TTFT+delay, b.TTFT)
		require.Equal(t, a.E2E+delay, b.E2E)
		require.Equal(t, a.MeanITLUs, b.MeanITLUs)
		require.Equal(t, a.SchedulingDelay, b.SchedulingDelay)
	}
	require.Equal(t, async.ITL, late.ITL)
	require.Equal(t, async.Steps, late.Steps)
	require.Equal(t, async.BusyUs, late.BusyUs)
}

// A request queued while the last step in flight runs (the engine has no
// next step scheduled) waits for that step's end: steps never overlap.
func TestStepsNeverOverlap(t *testing.T) {
	for _, d := range []int{0, 1} {
		cfg := pipelineConfig(d, 0)
		rec := &recorder{}
		cfg.Observer = rec
		// Request 0 finishes in its one step [0, 10) ms; request 1 arrives
		// at 4 ms, while that step runs and nothing follows it.
		res := run(t, cfg, specs([3]int64{0, 100, 1}, [3]int64{4000, 100, 1}))
		for i := 1; i < len(rec.steps); i++ {
			prev := rec.steps[i-1]
			require.GreaterOrEqual(t, rec.steps[i].StartUs, prev.StartUs+prev.CycleUs, "async %d: step %d starts before step %d ends", d, rec.steps[i].ID, prev.ID)
		}
		require.Equal(t, int64(2), res.Steps)
		// Queued at 10 ms (the boundary); the engine is then idle, so async
		// scheduling adds nothing.
		require.Equal(t, int64(6000+10000), res.PerRequest[1].TTFT, "async %d", d)
	}
}

func TestPipelineValidate(t *testing.T) {
	for _, tc := range []struct {
		p     Pipeline
		field string
	}{
		{Pipeline{AsyncDepth: 2}, "async_scheduling_depth"},
		{Pipeline{AsyncDepth: -1}, "async_scheduling_depth"},
		{Pipeline{OutputDelayUs: -1}, "output_delay_us"},
		{Pipeline{OutputDelayUs: 1 << 62}, "output_delay_us"},
	} {
		err := tc.p.Validate()
		require.ErrorContains(t, err, tc.field)
	}
	require.NoError(t, DefaultPipeline().Validate())
}

// TestPipelineTimelines replays the scripts in testdata/pipeline: each
// sets the pipeline and a list of requests (10 ms steps, 512-token budget)
// and checks the timeline of journey events, step by step. Regenerate
// with go test ./sim -run Timelines -update after checking the change.
func TestPipelineTimelines(t *testing.T) {
	files, err := filepath.Glob("testdata/pipeline/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			script, _, _ := strings.Cut(string(data), "----\n")
			cfg, reqs := parsePipelineScript(t, f, script)
			rec := &recorder{}
			cfg.Observer = rec
			res := run(t, cfg, reqs)
			got := script + "----\n" + timeline(rec, res)
			if *update {
				require.NoError(t, os.WriteFile(f, []byte(got), 0o644))
				return
			}
			require.Equal(t, string(data), got, "%s is stale: go test ./sim -run Timelines -update", f)
		})
	}
}

// parsePipelineScript reads "async D", "output_delay_us N" and
// "request ID AT_US PROMPT OUTPUT" lines; # starts a comment.
func parsePipelineScript(t *testing.T, file, script string) (Config, []RequestSpec) {
	async, delay := 0, int64(0)
	var reqs []RequestSpec
	sc := bufio.NewScanner(strings.NewReader(script))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		nums := make([]int64, len(fields)-1)
		for i, s := range fields[1:] {
			v, err := strconv.ParseInt(s, 10, 64)
			require.NoError(t, err, "%s:%d", file, n)
			nums[i] = v
		}
		switch {
		case fields[0] == "async" && len(nums) == 1:
			async = int(nums[0])
		case fields[0] == "output_delay_us" && len(nums) == 1:
			delay = nums[0]
		case fields[0] == "request" && len(nums) == 4:
			reqs = append(reqs, RequestSpec{ID: nums[0], ArrivalUs: nums[1], PromptTokens: nums[2], OutputTokens: nums[3]})
		default:
			t.Fatalf("%s:%d: cannot read %q", file, n, sc.Text())
		}
	}
	return pipelineConfig(async, delay), reqs
}

// timeline prints each step with the journey events it caused, then each
// request's latencies as the client sees them.
func timeline(rec *recorder, res *Result) string {
	var b strings.Builder
	j := 0
	for _, st := range rec.steps {
		// Journey events before the step's schedule (QUEUED) carry the
		// previous step id; SCHEDULED ones this step's.
		fmt.Fprintf(&b, "step %d [%d, %d) ms: %d prefill + %d decode tokens, %d running, %d waiting\n",
			st.ID, st.StartUs/1000, (st.StartUs+st.CycleUs)/1000, st.PrefillTok, st.DecodeTok, st.Running, st.Waiting)
		for j < len(rec.journeys) && rec.journeys[j].Step <= st.ID {
			ev := rec.journeys[j]
			fmt.Fprintf(&b, "  %-11s req %d at %g ms\n", ev.Kind, ev.Req, float64(ev.AtUs)/1000)
			j++
		}
	}
	for ; j < len(rec.journeys); j++ {
		ev := rec.journeys[j]
		fmt.Fprintf(&b, "  %-11s req %d at %g ms\n", ev.Kind, ev.Req, float64(ev.AtUs)/1000)
	}
	for _, r := range res.PerRequest {
		itl := "-"
		if r.MeanITLUs >= 0 {
			itl = fmt.Sprintf("%g ms", float64(r.MeanITLUs)/1000)
		}
		fmt.Fprintf(&b, "request %d: arrival %g ms, queue wait %g ms, TTFT %g ms, mean ITL %s, E2E %g ms\n",
			r.ID, float64(r.ArrivalUs)/1000, float64(r.SchedulingDelay)/1000, float64(r.TTFT)/1000, itl, float64(r.E2E)/1000)
	}
	return b.String()
}
