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
// requests (log scale) against precision (the worse of the two probes; the
// labels give both), one point per target that has both; ours filled,
// peers hollow.
func (r *Report) WriteChart(w io.Writer) error {
	type pt struct {
		name  string
		ours  bool
		bytes float64
		prec  float64 // the worse of the two probes
		pb    float64 // boundary burst
		ps    float64 // burst then steady
	}
	var pts []pt
	for _, rw := range r.Rows {
		if rw.BytesAfterLimit == nil || rw.PrecisionBoundary == nil || rw.PrecisionBurstSteady == nil {
			continue
		}
		pts = append(pts, pt{rw.Name, rw.Kind == "ours", float64(max(*rw.BytesAfterLimit, 1)),
			max(*rw.PrecisionBoundary, *rw.PrecisionBurstSteady), *rw.PrecisionBoundary, *rw.PrecisionBurstSteady})
	}
	if len(pts) == 0 {
		return errors.New("no target has both bytes per subject and precision (bytes need a real Redis)")
	}
	const (
		W, H                   = 940.0, 500.0
		left, right, top, bott = 70.0, 330.0, 50.0, 64.0
	)
	minB, maxB := math.Inf(1), math.Inf(-1)
	maxP := 2.0
	for _, p := range pts {
		minB, maxB = min(minB, p.bytes), max(maxB, p.bytes)
		maxP = max(maxP, p.prec)
	}
	lo, hi := niceBelow(minB*0.8), niceAbove(maxB*1.25)
	pLo, pHi := 0.9, math.Ceil(maxP*10)/10+0.1
	x := func(b float64) float64 {
		return left + (math.Log10(b)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*(W-left-right)
	}
	y := func(p float64) float64 { return H - bott - (p-pLo)/(pHi-pLo)*(H-top-bott) }

	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&s, `<rect x="0" y="0" width="%.0f" height="%.0f" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(&s, `<text x="%.0f" y="22" font-size="15" font-weight="bold">Memory against precision, limit %s</text>`+"\n", left, html.EscapeString(r.Workload.Limit))
	fmt.Fprintf(&s, `<text x="%.0f" y="38" fill="#555">%s; lower left is better; labels: bytes, boundary burst / burst then steady</text>`+"\n", left, html.EscapeString(r.Server))
	// axes and grid
	for d := math.Pow(10, math.Floor(math.Log10(lo))); d <= hi*1.0001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := d * m
			if v < lo*0.9999 || v > hi*1.0001 {
				continue
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
	fmt.Fprintf(&s, `<text x="%.0f" y="%.0f" text-anchor="middle">bytes per subject after limit requests (MEMORY USAGE, log scale)</text>`+"\n", (left+W-right)/2, H-bott+34)
	fmt.Fprintf(&s, `<text transform="translate(18 %.0f) rotate(-90)" text-anchor="middle">most allowed in any window / limit (1.00 = exact)</text>`+"\n", (top+H-bott)/2)

	// Points: peers as grey rings drawn first, ours as blue dots on top, so
	// a peer and one of ours on the same spot show as a dot in a ring.
	// Labels sit in the right margin in the order of the points, joined to
	// them by leader lines, so coinciding points stay readable.
	sort.SliceStable(pts, func(i, j int) bool {
		if pts[i].prec != pts[j].prec {
			return pts[i].prec > pts[j].prec
		}
		return pts[i].bytes < pts[j].bytes
	})
	for _, p := range pts {
		if !p.ours {
			fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="8" fill="none" stroke="#888" stroke-width="2"/>`+"\n", x(p.bytes), y(p.prec))
		}
	}
	for _, p := range pts {
		if p.ours {
			fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="5" fill="#1f6fd1"/>`+"\n", x(p.bytes), y(p.prec))
		}
	}
	// label baselines: near their points, at least step apart, inside the plot
	step := min(18.0, (H-bott-top)/float64(len(pts)))
	ly := make([]float64, len(pts))
	for i, p := range pts {
		ly[i] = max(y(p.prec)+4, top+12)
		if i > 0 {
			ly[i] = max(ly[i], ly[i-1]+step)
		}
	}
	for i := len(pts) - 1; i >= 0; i-- {
		bottom := H - bott - 4
		if i < len(pts)-1 {
			bottom = ly[i+1] - step
		}
		ly[i] = min(ly[i], bottom)
	}
	for i, p := range pts {
		color := "#1f6fd1"
		if !p.ours {
			color = "#666"
		}
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="%s" stroke-width="0.7" stroke-dasharray="3,3"/>`+"\n", x(p.bytes), y(p.prec), W-right+10, ly[i]-4, color)
		fmt.Fprintf(&s, `<text x="%.0f" y="%.1f" fill="%s">%s: %.0f B, %.2f / %.2f</text>`+"\n", W-right+14, ly[i], color, html.EscapeString(p.name), p.bytes, p.pb, p.ps)
	}
	fmt.Fprintf(&s, `<circle cx="%.0f" cy="%.0f" r="5" fill="#1f6fd1"/>`+"\n"+`<text x="%.0f" y="%.0f">ours</text>`+"\n", left+10, H-18, left+20, H-14)
	fmt.Fprintf(&s, `<circle cx="%.0f" cy="%.0f" r="8" fill="none" stroke="#888" stroke-width="2"/>`+"\n"+`<text x="%.0f" y="%.0f">peers</text>`+"\n", left+80, H-18, left+92, H-14)
	s.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.String())
	return err
}

// niceBelow returns the largest 1, 2 or 5 times a power of ten <= v.
func niceBelow(v float64) float64 {
	d := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{5, 2, 1} {
		if d*m <= v {
			return d * m
		}
	}
	return d
}

// niceAbove returns the smallest 1, 2 or 5 times a power of ten >= v.
func niceAbove(v float64) float64 {
	d := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if d*m >= v {
			return d * m
		}
	}
	return 10 * d
}
