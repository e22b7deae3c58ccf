package report

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Series is one line of a chart.
type Series struct {
	Name   string
	X, Y   []float64
	Color  color.RGBA
	Dashed bool
	// Markers draws a dot at every point (for replayed sizes).
	Markers bool
}

// Band is a shaded area between two curves over the same x.
type Band struct {
	Name   string
	X      []float64
	Lo, Hi []float64
	Color  color.RGBA
	// Alpha is the fill opacity (0: 70 of 255).
	Alpha uint8
}

func (b Band) alpha() uint8 {
	if b.Alpha == 0 {
		return 70
	}
	return b.Alpha
}

// Rule is a horizontal (Y) or vertical (X) reference line.
type Rule struct {
	Value  float64
	Label  string
	Color  color.RGBA
	Dashed bool
}

// Axis kinds.
const (
	AxisLinear = iota
	AxisLog
	AxisTime // values are Unix seconds
)

// Chart is a line chart rendered to PNG.
type Chart struct {
	Title          string
	XLabel, YLabel string
	XAxis          int
	XFormat        func(float64) string
	YFormat        func(float64) string
	// YMin and YMax fix the y range when YMax > YMin; else it fits the data.
	YMin, YMax float64
	Series     []Series
	Bands      []Band
	HRules     []Rule
	VRules     []Rule
	W, H       int
}

// Colours used across the report.
var (
	Black  = color.RGBA{0, 0, 0, 255}
	Blue   = color.RGBA{31, 119, 180, 255}
	Orange = color.RGBA{255, 127, 14, 255}
	Green  = color.RGBA{44, 160, 44, 255}
	Red    = color.RGBA{214, 39, 40, 255}
	Purple = color.RGBA{148, 103, 189, 255}
	Brown  = color.RGBA{140, 86, 75, 255}
	Pink   = color.RGBA{227, 119, 194, 255}
	Gray   = color.RGBA{127, 127, 127, 255}
	Olive  = color.RGBA{188, 189, 34, 255}
	Cyan   = color.RGBA{23, 190, 207, 255}
	Navy   = color.RGBA{0, 0, 128, 255}
	grid   = color.RGBA{225, 225, 225, 255}
)

// Palette gives distinct colours for replayed policies.
var Palette = []color.RGBA{Orange, Green, Red, Purple, Brown, Pink, Gray, Olive, Cyan, Navy, Blue}

const (
	marginL = 78
	marginR = 24
	marginT = 44
	marginB = 48
)

type canvas struct {
	img            *image.RGBA
	c              *Chart
	x0, x1, y0, y1 float64 // data range
	px0, px1       int     // plot area, pixels
	py0, py1       int
}

// PNG renders the chart.
func (c *Chart) PNG() ([]byte, error) {
	if c.W == 0 {
		c.W, c.H = 900, 420
	}
	img := image.NewRGBA(image.Rect(0, 0, c.W, c.H))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	cv := &canvas{img: img, c: c, px0: marginL, px1: c.W - marginR, py0: marginT, py1: c.H - marginB}
	cv.ranges()
	cv.axes()
	for _, b := range c.Bands {
		cv.band(b)
	}
	for _, s := range c.Series {
		for i := 1; i < len(s.X); i++ {
			if skip(s.X[i-1], s.Y[i-1]) || skip(s.X[i], s.Y[i]) {
				continue
			}
			cv.line(cv.pxX(s.X[i-1]), cv.py(s.Y[i-1]), cv.pxX(s.X[i]), cv.py(s.Y[i]), s.Color, s.Dashed, 2)
		}
		if s.Markers {
			for i := range s.X {
				if !skip(s.X[i], s.Y[i]) {
					cv.dot(cv.pxX(s.X[i]), cv.py(s.Y[i]), s.Color)
				}
			}
		}
	}
	// Rules are labelled in the legend: text on the plot would hide data.
	for _, r := range c.HRules {
		y := cv.py(r.Value)
		cv.line(float64(cv.px0), y, float64(cv.px1), y, r.Color, r.Dashed, 1)
	}
	for _, r := range c.VRules {
		x := cv.pxX(r.Value)
		cv.line(x, float64(cv.py0), x, float64(cv.py1), r.Color, r.Dashed, 1)
	}
	cv.legend()
	cv.text(marginL, 18, c.Title, Black)
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("report: encode png: %w", err)
	}
	return buf.Bytes(), nil
}

func skip(x, y float64) bool { return math.IsNaN(x) || math.IsNaN(y) || math.IsInf(y, 0) }

func (cv *canvas) ranges() {
	c := cv.c
	x0, x1 := math.Inf(1), math.Inf(-1)
	y0, y1 := math.Inf(1), math.Inf(-1)
	see := func(x, y float64) {
		if skip(x, y) || (c.XAxis == AxisLog && x <= 0) {
			return
		}
		x0, x1 = math.Min(x0, x), math.Max(x1, x)
		y0, y1 = math.Min(y0, y), math.Max(y1, y)
	}
	for _, s := range c.Series {
		for i := range s.X {
			see(s.X[i], s.Y[i])
		}
	}
	for _, b := range c.Bands {
		for i := range b.X {
			see(b.X[i], b.Lo[i])
			see(b.X[i], b.Hi[i])
		}
	}
	for _, r := range c.HRules {
		y0, y1 = math.Min(y0, r.Value), math.Max(y1, r.Value)
	}
	if math.IsInf(x0, 0) {
		x0, x1, y0, y1 = 0, 1, 0, 1
	}
	if x1 <= x0 {
		x1 = x0 + 1
	}
	if c.YMax > c.YMin {
		y0, y1 = c.YMin, c.YMax
	} else {
		pad := (y1 - y0) * 0.05
		if pad == 0 {
			pad = math.Max(math.Abs(y1)*0.05, 1)
		}
		y0, y1 = math.Min(0, y0-pad), y1+pad
		if y0 < 0 && cv.allNonNegative() {
			y0 = 0
		}
	}
	cv.x0, cv.x1, cv.y0, cv.y1 = x0, x1, y0, y1
}

func (cv *canvas) allNonNegative() bool {
	for _, s := range cv.c.Series {
		for _, y := range s.Y {
			if y < 0 {
				return false
			}
		}
	}
	return true
}

func (cv *canvas) pxX(x float64) float64 {
	f := (x - cv.x0) / (cv.x1 - cv.x0)
	if cv.c.XAxis == AxisLog {
		f = math.Log(math.Max(x, cv.x0)/cv.x0) / math.Log(cv.x1/cv.x0)
	}
	return float64(cv.px0) + f*float64(cv.px1-cv.px0)
}

func (cv *canvas) py(y float64) float64 {
	f := (y - cv.y0) / (cv.y1 - cv.y0)
	return float64(cv.py1) - f*float64(cv.py1-cv.py0)
}

func (cv *canvas) axes() {
	c := cv.c
	yf := c.YFormat
	if yf == nil {
		yf = func(v float64) string { return fmt.Sprintf("%g", v) }
	}
	for _, t := range niceTicks(cv.y0, cv.y1, 6) {
		y := cv.py(t)
		cv.line(float64(cv.px0), y, float64(cv.px1), y, grid, false, 1)
		l := yf(t)
		cv.text(cv.px0-6-7*len(l), int(y)+4, l, Black)
	}
	xf := c.XFormat
	if xf == nil {
		xf = func(v float64) string { return fmt.Sprintf("%g", v) }
	}
	var xt []float64
	switch c.XAxis {
	case AxisLog:
		xt = logTicks(cv.x0, cv.x1)
	case AxisTime:
		xt = timeTicks(cv.x0, cv.x1)
		if c.XFormat == nil {
			xf = func(v float64) string { return time.Unix(int64(v), 0).UTC().Format("Jan 02") }
		}
	default:
		xt = niceTicks(cv.x0, cv.x1, 8)
	}
	lastEnd := -1000
	for _, t := range xt {
		x := cv.pxX(t)
		cv.line(x, float64(cv.py0), x, float64(cv.py1), grid, false, 1)
		l := xf(t)
		start := int(x) - 7*len(l)/2
		if start > lastEnd+6 { // skip labels that would overlap
			cv.text(start, cv.py1+16, l, Black)
			lastEnd = start + 7*len(l)
		}
	}
	cv.line(float64(cv.px0), float64(cv.py1), float64(cv.px1), float64(cv.py1), Black, false, 1)
	cv.line(float64(cv.px0), float64(cv.py0), float64(cv.px0), float64(cv.py1), Black, false, 1)
	cv.text((cv.px0+cv.px1)/2-7*len(c.XLabel)/2, c.H-10, c.XLabel, Black)
	cv.text(6, marginT-10, c.YLabel, Black)
}

func (cv *canvas) legend() {
	x, y := cv.px0+10, cv.py0+14
	entry := func(name string, col color.RGBA, dashed, box bool) {
		if name == "" {
			return
		}
		for dy := -11; dy <= 3; dy++ { // a light backdrop keeps entries legible over data
			for dx := -4; dx < 32+7*len(name); dx++ {
				cv.blend(x+dx, y+dy, color.RGBA{255, 255, 255, 255}, 200)
			}
		}
		if box {
			for dy := -6; dy <= 0; dy++ {
				for dx := 0; dx < 22; dx++ {
					cv.blend(x+dx, y+dy-1, col, 90)
				}
			}
		} else {
			cv.line(float64(x), float64(y-4), float64(x+22), float64(y-4), col, dashed, 2)
		}
		cv.text(x+28, y, name, Black)
		y += 15
	}
	for _, s := range cv.c.Series {
		entry(s.Name, s.Color, s.Dashed, false)
	}
	for _, b := range cv.c.Bands {
		entry(b.Name, b.Color, false, true)
	}
	for _, r := range cv.c.HRules {
		entry(r.Label, r.Color, r.Dashed, false)
	}
	for _, r := range cv.c.VRules {
		entry(r.Label, r.Color, r.Dashed, false)
	}
}

func (cv *canvas) text(x, y int, s string, col color.RGBA) {
	d := font.Drawer{Dst: cv.img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func (cv *canvas) blend(x, y int, col color.RGBA, alpha uint8) {
	if !(image.Point{x, y}.In(cv.img.Rect)) {
		return
	}
	o := cv.img.RGBAAt(x, y)
	a := uint32(alpha)
	mix := func(f, b uint8) uint8 { return uint8((uint32(f)*a + uint32(b)*(255-a)) / 255) }
	cv.img.SetRGBA(x, y, color.RGBA{mix(col.R, o.R), mix(col.G, o.G), mix(col.B, o.B), 255})
}

// line draws from (x0,y0) to (x1,y1), width w pixels, optionally dashed.
func (cv *canvas) line(x0, y0, x1, y1 float64, col color.RGBA, dashed bool, w int) {
	dx, dy := x1-x0, y1-y0
	n := int(math.Max(math.Abs(dx), math.Abs(dy))) + 1
	for i := 0; i <= n; i++ {
		if dashed && (i/6)%2 == 1 {
			continue
		}
		t := float64(i) / float64(n)
		x, y := int(math.Round(x0+t*dx)), int(math.Round(y0+t*dy))
		if y < cv.py0-1 || y > cv.py1+1 {
			continue
		}
		for a := 0; a < w; a++ {
			for b := 0; b < w; b++ {
				cv.blend(x+a, y+b, col, 255)
			}
		}
	}
}

func (cv *canvas) dot(x, y float64, col color.RGBA) {
	for a := -3; a <= 3; a++ {
		for b := -3; b <= 3; b++ {
			if a*a+b*b <= 10 {
				cv.blend(int(x)+a, int(y)+b, col, 255)
			}
		}
	}
}

// band fills the area between Lo and Hi. Each pixel column is filled once,
// from the envelope of all segments crossing it, so dense data shows no seams.
func (cv *canvas) band(b Band) {
	w := cv.px1 - cv.px0 + 1
	top := make([]float64, w)
	bot := make([]float64, w)
	for i := range top {
		top[i], bot[i] = math.Inf(1), math.Inf(-1)
	}
	see := func(x int, lo, hi float64) {
		if i := x - cv.px0; i >= 0 && i < w && !math.IsNaN(lo) && !math.IsNaN(hi) {
			top[i] = math.Min(top[i], math.Min(cv.py(hi), cv.py(lo)))
			bot[i] = math.Max(bot[i], math.Max(cv.py(hi), cv.py(lo)))
		}
	}
	for i := 1; i < len(b.X); i++ {
		xa, xb := cv.pxX(b.X[i-1]), cv.pxX(b.X[i])
		for x := int(math.Floor(xa)); x <= int(math.Ceil(xb)); x++ {
			t := 0.0
			if xb > xa {
				t = math.Min(1, math.Max(0, (float64(x)-xa)/(xb-xa)))
			}
			see(x, b.Lo[i-1]+t*(b.Lo[i]-b.Lo[i-1]), b.Hi[i-1]+t*(b.Hi[i]-b.Hi[i-1]))
		}
	}
	for i := range w {
		for y := int(math.Max(top[i], float64(cv.py0))); y <= int(math.Min(bot[i], float64(cv.py1))); y++ {
			cv.blend(cv.px0+i, y, b.Color, b.alpha())
		}
	}
}

// niceTicks returns about n round values covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		return []float64{lo}
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

// logTicks returns 1-2-5 values within [lo, hi].
func logTicks(lo, hi float64) []float64 {
	// A log axis without a positive range (an empty chart) has no ticks;
	// from log10(0) = -Inf the loop below would never end.
	if !(lo > 0) || !(hi >= lo) || math.IsInf(hi, 0) {
		return nil
	}
	var out []float64
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, e); v >= lo*0.999 && v <= hi*1.001 {
				out = append(out, v)
			}
		}
	}
	return out
}

// timeTicks returns UTC midnights spaced by a round number of days.
func timeTicks(lo, hi float64) []float64 {
	days := (hi - lo) / 86400
	step := 1.0
	for _, s := range []float64{1, 2, 7, 14, 30, 61, 91, 182, 365} {
		step = s
		if days/s <= 10 {
			break
		}
	}
	if days < 2 {
		return niceTicks(lo, hi, 6)
	}
	var out []float64
	for v := math.Ceil(lo/86400) * 86400; v <= hi; v += step * 86400 {
		out = append(out, v)
	}
	return out
}
