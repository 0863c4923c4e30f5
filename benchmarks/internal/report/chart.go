package report

import (
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
)

// WriteChart writes an SVG scatter chart: bytes per subject after limit
// requests (log scale) against precision (the worse of the two probes),
// one point per target that has both; ours filled, peers hollow.
func (r *Report) WriteChart(w io.Writer) error {
	type pt struct {
		name  string
		ours  bool
		bytes float64
		prec  float64
	}
	var pts []pt
	for _, rw := range r.Rows {
		if rw.BytesAfterLimit == nil || rw.PrecisionBoundary == nil || rw.PrecisionBurstSteady == nil {
			continue
		}
		pts = append(pts, pt{rw.Name, rw.Kind == "ours", float64(max(*rw.BytesAfterLimit, 1)),
			max(*rw.PrecisionBoundary, *rw.PrecisionBurstSteady)})
	}
	if len(pts) == 0 {
		return errors.New("no target has both bytes per subject and precision (bytes need a real Redis)")
	}
	const (
		W, H                   = 760.0, 480.0
		left, right, top, bott = 70.0, 190.0, 50.0, 60.0
	)
	minB, maxB := math.Inf(1), math.Inf(-1)
	maxP := 2.0
	for _, p := range pts {
		minB, maxB = min(minB, p.bytes), max(maxB, p.bytes)
		maxP = max(maxP, p.prec)
	}
	lo := math.Pow(10, math.Floor(math.Log10(minB)))
	hi := math.Pow(10, math.Ceil(math.Log10(maxB)))
	if hi <= lo {
		hi = lo * 10
	}
	pLo, pHi := 0.9, math.Ceil(maxP*10)/10+0.1
	x := func(b float64) float64 {
		return left + (math.Log10(b)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*(W-left-right)
	}
	y := func(p float64) float64 { return H - bott - (p-pLo)/(pHi-pLo)*(H-top-bott) }

	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&s, `<text x="%.0f" y="22" font-size="15" font-weight="bold">Memory against precision, limit %s</text>`+"\n", left, html.EscapeString(r.Workload.Limit))
	fmt.Fprintf(&s, `<text x="%.0f" y="38" fill="#555">%s; lower left is better</text>`+"\n", left, html.EscapeString(r.Server))
	// axes and grid
	for d := lo; d <= hi*1.0001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := d * m
			if v > hi*1.0001 {
				break
			}
			fmt.Fprintf(&s, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ddd"/>`+"\n", x(v), top, x(v), H-bott)
			fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle">%g</text>`+"\n", x(v), H-bott+16, v)
		}
	}
	for p := 1.0; p <= pHi+1e-9; p += 0.25 {
		fmt.Fprintf(&s, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(p), W-right, y(p))
		fmt.Fprintf(&s, `<text x="%.0f" y="%.1f" text-anchor="end">%.2f</text>`+"\n", left-6, y(p)+4, p)
	}
	fmt.Fprintf(&s, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#333"/>`+"\n", left, top, W-left-right, H-top-bott)
	fmt.Fprintf(&s, `<text x="%.0f" y="%.0f" text-anchor="middle">bytes per subject after limit requests (MEMORY USAGE, log scale)</text>`+"\n", (left+W-right)/2, H-18)
	fmt.Fprintf(&s, `<text transform="translate(18 %.0f) rotate(-90)" text-anchor="middle">most allowed in any window / limit (1.00 = exact)</text>`+"\n", (top+H-bott)/2)

	// points, labels at the right margin joined by leader lines so that
	// points that coincide stay readable
	sort.Slice(pts, func(i, j int) bool {
		return y(pts[i].prec) < y(pts[j].prec) || (y(pts[i].prec) == y(pts[j].prec) && pts[i].bytes < pts[j].bytes)
	})
	labelY := top + 8
	for _, p := range pts {
		px, py := x(p.bytes), y(p.prec)
		fill, stroke := "#1f6fd1", "#1f6fd1"
		if !p.ours {
			fill, stroke = "white", "#888"
		}
		fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="6" fill="%s" stroke="%s" stroke-width="2"/>`+"\n", px, py, fill, stroke)
		ly := max(labelY, py)
		labelY = ly + 16
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="%s" stroke-dasharray="2,2"/>`+"\n", px+6, py, W-right+8, ly-4, stroke)
		fmt.Fprintf(&s, `<text x="%.0f" y="%.1f">%s (%.0f B, %.2f)</text>`+"\n", W-right+12, ly, html.EscapeString(p.name), p.bytes, p.prec)
	}
	fmt.Fprintf(&s, `<circle cx="%.0f" cy="%.0f" r="5" fill="#1f6fd1"/><text x="%.0f" y="%.0f">ours</text>`+"\n", left+10, H-bott+34, left+20, H-bott+38)
	fmt.Fprintf(&s, `<circle cx="%.0f" cy="%.0f" r="5" fill="white" stroke="#888" stroke-width="2"/><text x="%.0f" y="%.0f">peers</text>`+"\n", left+70, H-bott+34, left+80, H-bott+38)
	s.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.String())
	return err
}
