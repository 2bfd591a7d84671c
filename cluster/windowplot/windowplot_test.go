package windowplot_test

import (
	"bytes"
	"image/png"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/cluster/windowplot"
)

// rows are 40 windows of 250 ms: a ramp of load, with windows where
// nothing completed (no TTFT: the line breaks) and one lone TTFT point.
func rows() []cluster.Window {
	var out []cluster.Window
	for k := int64(0); k < 40; k++ {
		w := cluster.Window{StartUs: k * 250_000, EndUs: (k + 1) * 250_000, Arrived: 10 + k, Completed: k % 7,
			QueueDepth: k / 3, Running: min(k, 16), KVUtilMean: float64(k) / 80, KVUtilMax: float64(k) / 50, InFlight: k}
		if k == 20 {
			w.Completed = 0
		}
		if w.Completed > 0 || k == 21 {
			w.Completed = max(w.Completed, 1)
			w.TTFTP50Us, w.TTFTP99Us = 20_000+k*1000, 80_000+k*3000
		}
		out = append(out, w)
	}
	return out
}

func TestWritePNG(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, windowplot.Write(&b, rows(), "png"))
	img, err := png.Decode(bytes.NewReader(b.Bytes()))
	require.NoError(t, err)
	require.Equal(t, 768, img.Bounds().Dx())
	require.Equal(t, 1056, img.Bounds().Dy())
	// Something is drawn: not every pixel is the background's.
	bg := img.At(0, 0)
	var inked int
	for y := 0; y < img.Bounds().Dy(); y += 4 {
		for x := 0; x < img.Bounds().Dx(); x += 4 {
			if img.At(x, y) != bg {
				inked++
			}
		}
	}
	require.Greater(t, inked, 1000)

	var again bytes.Buffer
	require.NoError(t, windowplot.Write(&again, rows(), "png"))
	require.Equal(t, b.Bytes(), again.Bytes(), "the same rows, the same bytes")
}

func TestWriteSVG(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, windowplot.Write(&b, rows(), "svg"))
	s := b.String()
	require.True(t, strings.HasPrefix(s, "<svg") || strings.HasPrefix(s, "<?xml"), "%.40q", s)
	require.Contains(t, s, "</svg>")
	for _, label := range []string{"requests/s", "TTFT (ms)", "KV utilization", "simulated time (s)", "time windows of 250ms"} {
		require.Contains(t, s, label)
	}
	var again bytes.Buffer
	require.NoError(t, windowplot.Write(&again, rows(), "svg"))
	require.Equal(t, s, again.String(), "the same rows, the same bytes")
}

func TestWritePDF(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, windowplot.Write(&b, rows(), "pdf"))
	s := b.String()
	require.True(t, strings.HasPrefix(s, "%PDF-"))
	// 8 × 11 inches; no date of writing (see internal/plotcanvas).
	require.True(t, strings.Contains(s, "/MediaBox [0 0 576.00 792.00]"))
	require.True(t, strings.Contains(s, "/CreationDate (D:19700101000000)"))
	var again bytes.Buffer
	require.NoError(t, windowplot.Write(&again, rows(), "pdf"))
	require.True(t, bytes.Equal(b.Bytes(), again.Bytes()), "the same rows, the same bytes")
}

func TestWriteErrors(t *testing.T) {
	var b bytes.Buffer
	require.ErrorContains(t, windowplot.Write(&b, rows(), "gif"), `image format "gif" is not one of png, svg, pdf`)
	require.ErrorContains(t, windowplot.Write(&b, nil, "png"), "no time windows")
	// One window, all zero: still a figure.
	require.NoError(t, windowplot.Write(&b, []cluster.Window{{StartUs: 0, EndUs: 1000}}, "png"))
	_, err := png.Decode(&b)
	require.NoError(t, err)
}

// TestReplicasPanel: the replicas panel is drawn when the fleet changed
// during the run, and only then.
func TestReplicasPanel(t *testing.T) {
	svg := func(r []cluster.Window) string {
		var b bytes.Buffer
		require.NoError(t, windowplot.Write(&b, r, "svg"))
		return b.String()
	}
	fixed := rows()
	for i := range fixed {
		fixed[i].ReplicasReady = 4
	}
	require.NotContains(t, svg(fixed), "starting (pending, loading, warming)")
	scaled := rows()
	for i := range scaled {
		scaled[i].ReplicasReady = 2 + int64(i)/10
		if i%10 == 5 {
			scaled[i].ReplicasStarting = 1
		}
	}
	s := svg(scaled)
	require.Contains(t, s, ">replicas<")
	require.Contains(t, s, "starting (pending, loading, warming)")
}
