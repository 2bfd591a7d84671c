// Package plotcanvas makes the gonum.org/v1/plot canvases that blis's
// figures (calibrate fit's residual plots, blis validate --plot, blis
// cluster --window-plot) draw on, by format, so that each format's output is
// byte-deterministic: the same figure gives the same file in every run, on
// every machine of one architecture with the same Go release.
//
// PNG (vgimg) and SVG (vgsvg) are deterministic as they come: the
// rasterizer works in fixed point, text is drawn from the Liberation fonts
// embedded in the binary, and neither writes a date. (A PNG built for an
// architecture where Go fuses multiply-add, such as arm64, can differ from
// an amd64 one in a few antialiased glyph-edge pixels.) A PDF (vgpdf, through
// codeberg.org/go-pdf/fpdf) would carry the time it was written as its
// CreationDate and ModDate; New fixes both at 1970-01-01 00:00:00 UTC and
// sorts fpdf's resource catalogs (fpdf's own settings for reproducible
// output). docs/fit.md#plots has the evidence. EPS (vgeps) writes the time
// with no way to fix it, so it is not offered.
package plotcanvas

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"codeberg.org/go-pdf/fpdf"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgpdf"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Formats are the formats New draws, named like a file's extension.
var Formats = []string{"png", "svg", "pdf"}

// DPI is a PNG's resolution: a figure w inches wide is 96·w pixels wide.
// SVG and PDF are vector formats of the same size in points.
const DPI = 96

// PDFDate is the creation and modification date written into every PDF.
var PDFDate = time.Unix(0, 0).UTC()

var pdfOnce sync.Once

// New returns a white canvas of w × h in format, one of Formats. Draw on it
// with draw.New and write it with its WriteTo.
func New(format string, w, h vg.Length) (vg.CanvasWriterTo, error) {
	if w <= 0 || h <= 0 {
		return nil, fmt.Errorf("canvas size %v × %v is not positive", w, h)
	}
	switch format {
	case "png":
		return vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(DPI))}, nil
	case "svg":
		return vgsvg.New(w, h), nil
	case "pdf":
		// fpdf copies these package defaults into each new document; vgpdf
		// gives no access to its document to set them there.
		pdfOnce.Do(func() {
			fpdf.SetDefaultCreationDate(PDFDate)
			fpdf.SetDefaultModificationDate(PDFDate)
			fpdf.SetDefaultCatalogSort(true)
		})
		return vgpdf.New(w, h), nil
	}
	return nil, fmt.Errorf("image format %q is not one of %s", format, strings.Join(Formats, ", "))
}

// Pixels is the length of n PNG pixels.
func Pixels(n int) vg.Length { return vg.Length(n) * vg.Inch / DPI }

// FormatOf is the figure format of path, by its extension (one of
// Formats), or an error naming flag and path.
func FormatOf(flag, path string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if !slices.Contains(Formats, ext) {
		return "", fmt.Errorf("%s %s: a figure is .png, .svg or .pdf", flag, path)
	}
	return ext, nil
}
