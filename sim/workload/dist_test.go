package workload

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseDist(t *testing.T) {
	tests := []struct {
		in   string
		want Dist
		str  string
	}{
		{"512", Dist{Kind: KindConst, Mean: 512}, "const:512"},
		{" const:512 ", Dist{Kind: KindConst, Mean: 512}, "const:512"},
		{"CONST:7,max=5", Dist{Kind: KindConst, Mean: 7, Max: 5}, "const:7,max=5"},
		{"uniform:128,2048", Dist{Kind: KindUniform, Lo: 128, Hi: 2048}, "uniform:128,2048"},
		{"uniform: 1 , 1", Dist{Kind: KindUniform, Lo: 1, Hi: 1}, "uniform:1,1"},
		{"normal:mean=512,cv=0.3", Dist{Kind: KindNormal, Mean: 512, CV: 0.3}, "normal:mean=512,cv=0.3"},
		{"normal:cv=0.3,mean=512,max=8192,min=1", Dist{Kind: KindNormal, Mean: 512, CV: 0.3, Min: 1, Max: 8192}, "normal:mean=512,cv=0.3,min=1,max=8192"},
		{"lognormal:mean=512,cv=0.5,min=16", Dist{Kind: KindLognormal, Mean: 512, CV: 0.5, Min: 16}, "lognormal:mean=512,cv=0.5,min=16"},
		{"exponential:mean=256", Dist{Kind: KindExponential, Mean: 256}, "exponential:mean=256"},
		{"exponential:mean=1e6,max=100000", Dist{Kind: KindExponential, Mean: 1e6, Max: 100000}, "exponential:mean=1e+06,max=100000"},
		{"histogram:1-128=3, 4096=1,max=5000", Dist{Kind: KindHistogram, Max: 5000, Bins: []Bin{{1, 128, 3, 0.75}, {4096, 4096, 1, 1}}}, "histogram:1-128=3,4096=1,max=5000"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, err := ParseDist(tt.in)
			require.NoError(t, err)
			if tt.want.Kind == KindLognormal {
				tt.want.mu, tt.want.sigma = lognormalParams(tt.want.Mean, tt.want.CV)
			}
			require.Equal(t, tt.want, d)
			require.Equal(t, tt.str, d.String())
			back, err := ParseDist(d.String())
			require.NoError(t, err)
			require.Equal(t, d, back)
		})
	}
}

func TestParseDistErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `"" is not a finite number`},
		{"abc", "accepted forms:"},
		{"NaN", "not a finite number"},
		{"0", "const: value must be >= 1, got 0"},
		{"const:", "empty item"},
		{"normal:mean=5,cv=1,", "empty item"},
		{"const:1,2", "const takes 1 positional value(s), got 2"},
		{"pareto:mean=3", `unknown kind "pareto"`},
		{"uniform:10", "uniform takes 2 positional value(s), got 1"},
		{"uniform:0,10", "uniform: lo must be >= 1, got 0"},
		{"uniform:10,5", "uniform: hi must be >= 10, got 5"},
		{"normal:mean=512", "normal needs mean= and cv="},
		{"normal:mean=-1,cv=0.3", "normal: mean must be > 0, got -1"},
		{"lognormal:mean=512,cv=-1", "lognormal: cv must be > 0, got -1"},
		{"lognormal:mean=512,cv=inf", "cv: \"inf\" is not a finite number"},
		{"exponential:mean=256,cv=1", `exponential does not take "cv"`},
		{"exponential:mean=1,mean=2", "mean given twice"},
		{"normal:mean=5,cv=1,min=1.5", `min: "1.5" is not an integer`},
		{"normal:mean=5,cv=1,min=10,max=5", "normal: max 5 must be >= min 10"},
		{"normal:mean=5,cv=1,max=-1", "normal: max must be within"},
		{"uniform:max=5,1,2", "positional value \"1\" after key=value items"},
		{"const:1e300", "const: value must be <= "},
		{"histogram:1-128", `item "1-128" is not range=weight`},
		{"histogram:1-x=1", `range "1-x" is not N or N-M`},
		{"histogram:1-5=0", "weights must sum to a finite number > 0"},
		{"histogram:1-5=-1,6=2", "weight of 1-5 must be >= 0"},
		{"histogram:5-1=1", "range 5-1 must satisfy"},
		{"histogram:0-4=1", "range 0-4 must satisfy"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseDist(tt.in)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestDistValidate(t *testing.T) {
	require.ErrorContains(t, Dist{}.Validate(), "distribution kind is empty")
	require.ErrorContains(t, Dist{Kind: "zipf"}.Validate(), `unknown distribution kind "zipf"`)
	require.NoError(t, Dist{Kind: KindConst, Mean: 3}.Validate())
}

func TestSampleClamp(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name   string
		d      Dist
		lo, hi int64
	}{
		{"const rounds", Dist{Kind: KindConst, Mean: 2.6}, 3, 3},
		{"const raised to min", Dist{Kind: KindConst, Mean: 5, Min: 10}, 10, 10},
		{"const lowered to max", Dist{Kind: KindConst, Mean: 50, Max: 20}, 20, 20},
		{"normal default min 1", Dist{Kind: KindNormal, Mean: 1, CV: 5}, 1, maxTokens},
		{"normal min/max", Dist{Kind: KindNormal, Mean: 100, CV: 2, Min: 50, Max: 150}, 50, 150},
		{"lognormal huge cv", Dist{Kind: KindLognormal, Mean: 1e14, CV: 1e6}, 1, maxTokens},
		{"uniform", Dist{Kind: KindUniform, Lo: 3, Hi: 7}, 3, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.d.Validate())
			for range 2000 {
				v := tt.d.Sample(r)
				require.GreaterOrEqual(t, v, tt.lo)
				require.LessOrEqual(t, v, tt.hi)
			}
		})
	}
}

// meanCV returns the sample mean and coefficient of variation.
func meanCV(xs []float64) (mean, cv float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss/float64(len(xs)-1)) / mean
}

func TestDistStatistics(t *testing.T) {
	const n = 20000
	tests := []struct {
		d            Dist
		mean, cv     float64
		meanTol, cvT float64 // relative
	}{
		{Dist{Kind: KindLognormal, Mean: 512, CV: 0.5}, 512, 0.5, 0.05, 0.05},
		{Dist{Kind: KindNormal, Mean: 2000, CV: 0.2}, 2000, 0.2, 0.02, 0.05},
		{Dist{Kind: KindExponential, Mean: 1000}, 1000, 1, 0.05, 0.05},
		// Discrete uniform 1..100: mean 50.5, sd sqrt((100²-1)/12).
		{Dist{Kind: KindUniform, Lo: 1, Hi: 100}, 50.5, math.Sqrt((100*100-1)/12.0) / 50.5, 0.02, 0.03},
		// Half the mass on 10, half uniform on 91..110 (mean 100.5):
		// mean 55.25, E[x²] = (100 + 10133.5)/2.
		{mustDist("histogram:10=1,91-110=1"), 55.25, math.Sqrt((100+10133.5)/2-55.25*55.25) / 55.25, 0.02, 0.03},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(42, 7))
			xs := make([]float64, n)
			seen := map[int64]bool{}
			for i := range xs {
				v := tt.d.Sample(r)
				xs[i] = float64(v)
				seen[v] = true
			}
			mean, cv := meanCV(xs)
			require.InEpsilon(t, tt.mean, mean, tt.meanTol)
			require.InEpsilon(t, tt.cv, cv, tt.cvT)
			if tt.d.Kind == KindUniform {
				require.Len(t, seen, 100, "every value of 1..100 appears, bounds included")
				require.True(t, seen[1] && seen[100])
			}
		})
	}
}

func mustDist(s string) Dist {
	d, err := ParseDist(s)
	if err != nil {
		panic(err)
	}
	return d
}
