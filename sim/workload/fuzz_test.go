package workload

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/sim"
)

func FuzzParseDist(f *testing.F) {
	for _, s := range []string{
		"512", "const:512", "uniform:128,2048", "normal:mean=512,cv=0.3,min=1,max=8192",
		"lognormal:mean=512,cv=0.5", "exponential:mean=256,max=4096", "uniform:1,1,min=3",
		"normal:mean=1e300,cv=1e300", "", ":", "const:", "lognormal:cv=0,mean=1",
		"histogram:1-128=3,4096=1,max=5000", "histogram:5=0,6=1e308,7=1e308", "histogram:min=3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDist(s)
		if err != nil {
			return
		}
		back, err := ParseDist(d.String())
		require.NoError(t, err, "String() of %q is %q", s, d.String())
		require.Equal(t, d, back)
		require.Equal(t, d.String(), back.String())
		r := rand.New(rand.NewPCG(1, 2))
		for range 4 {
			v := d.Sample(r)
			require.GreaterOrEqual(t, v, d.lower())
			require.LessOrEqual(t, v, d.upper())
		}
	})
}

// FuzzReplayCSV writes arbitrary bytes to a file and replays it; seeds
// include a valid Parquet file, so both readers are exercised.
func FuzzReplayCSV(f *testing.F) {
	for _, s := range []string{
		"arrival_us,prompt_tokens,output_tokens\n0,10,5\n",
		"priority,output_tokens,prefix_tokens,arrival_us,prefix_group,prompt_tokens\n-2,5,8,10,3,12\n,6,,20,,7\n",
		"arrival_us,prompt_tokens,output_tokens\n\"0\",1\n",
		"session_id,tenant_id,arrival_us,prompt_tokens,output_tokens,slo_class\ns,a,5,1,1,batch\n,b,2,3,4,\n",
		"PAR1",
		"",
	} {
		f.Add([]byte(s))
	}
	// A valid requests.parquet, for the fuzzer to mutate.
	pq := filepath.Join(f.TempDir(), "requests.parquet")
	writeParquet(f, pq, "requests", allColumns, []pqRow{
		{arrived: f64(1), prompt: i64(1), output: i64(1)},
		{queued: f64(2), prompt: i64(3), output: i64(1)},
		{prompt: i64(1)},
	})
	b, err := os.ReadFile(pq)
	require.NoError(f, err)
	f.Add(b)
	path := filepath.Join(f.TempDir(), "w.csv") // one per worker process; cheaper than t.TempDir
	f.Fuzz(func(t *testing.T, data []byte) {
		require.NoError(t, os.WriteFile(path, data, 0o644))
		reqs, rep, err := Replay(path)
		if err != nil {
			return
		}
		require.NoError(t, sim.ValidateWorkload(reqs))
		require.Equal(t, int64(len(reqs)), rep.Kept)
	})
}

// FuzzParseSpec parses arbitrary bytes as a workload spec; whatever it
// accepts must stream valid requests in arrival order.
func FuzzParseSpec(f *testing.F) {
	for _, n := range Scenarios() {
		text, err := ScenarioText(n)
		require.NoError(f, err)
		f.Add(text)
	}
	f.Add([]byte(minimalSpec))
	f.Add([]byte("version: 1\nrequests: 5\nload_profile: [{type: ramp, start_s: 0, end_s: 1, from: 0, to: 9}]\ntenants: [{id: a, behavior: bursty}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec(data, "fuzz.yaml")
		if err != nil {
			return
		}
		clients := 0
		for _, tn := range s.Tenants {
			clients += tn.Clients
		}
		if clients > 1000 {
			return // valid, but too slow to start for a fuzz iteration
		}
		src := NewSource(s, sim.NewRNG(1))
		var last int64
		for i := 0; i < 200; i++ {
			at, ok := src.Peek()
			if !ok {
				break
			}
			r := src.Next()
			require.Equal(t, at, r.ArrivalUs)
			require.GreaterOrEqual(t, r.ArrivalUs, last)
			require.NoError(t, r.Validate())
			last = r.ArrivalUs
			src.RequestDone(r.ID, r.ArrivalUs, sim.Completed)
		}
	})
}
