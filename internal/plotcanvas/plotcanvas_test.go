package plotcanvas

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// render draws a line on a 200 × 100 pixel canvas of format, twice, the
// second time more than a second later, checks both give the same bytes
// and returns them.
func render(t *testing.T, format string) []byte {
	t.Helper()
	var out [2][]byte
	for i := range out {
		if i > 0 && format == "pdf" {
			time.Sleep(1100 * time.Millisecond) // fpdf's dates are in whole seconds
		}
		c, err := New(format, Pixels(200), Pixels(100))
		require.NoError(t, err)
		dc := draw.New(c)
		dc.StrokeLine2(draw.LineStyle{Color: color.Black, Width: vg.Points(1)}, 0, 0, Pixels(100), Pixels(50))
		var b bytes.Buffer
		_, err = c.WriteTo(&b)
		require.NoError(t, err)
		out[i] = b.Bytes()
	}
	require.True(t, bytes.Equal(out[0], out[1]), "%s: two renders differ", format)
	return out[0]
}

func TestNew(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(render(t, "png")))
	require.NoError(t, err)
	require.Equal(t, image.Rect(0, 0, 200, 100), img.Bounds())
	require.Equal(t, color.RGBAModel.Convert(color.White), color.RGBAModel.Convert(img.At(199, 0)), "a white background")
	// The line (y up from the bottom) crosses x = 50 at y = 75, antialiased.
	darkest := uint32(0xffff)
	for y := 73; y <= 77; y++ {
		r, _, _, _ := img.At(50, y).RGBA()
		darkest = min(darkest, r)
	}
	require.Less(t, darkest, uint32(0xa000), "the line is drawn")
	r, _, _, _ := img.At(50, 20).RGBA()
	require.Equal(t, uint32(0xffff), r, "nothing else is")

	svg := string(render(t, "svg"))
	require.Contains(t, svg, `width="150pt" height="75pt"`)

	pdf := string(render(t, "pdf"))
	require.True(t, strings.HasPrefix(pdf, "%PDF-"))
	for _, s := range []string{"/CreationDate (D:19700101000000)", "/ModDate (D:19700101000000)", "/MediaBox [0 0 150.00 75.00]"} {
		require.True(t, strings.Contains(pdf, s), "the PDF has no %q", s)
	}

	_, err = New("eps", Pixels(200), Pixels(100))
	require.EqualError(t, err, `image format "eps" is not one of png, svg, pdf`)
	_, err = New("png", 0, Pixels(100))
	require.ErrorContains(t, err, "not positive")
}
