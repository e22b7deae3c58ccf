package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"

	"github.com/hepcache/hepcache/internal/sim/bytesize"
	"github.com/hepcache/hepcache/internal/sim/replay"
)

// figure is one chart of a report page.
type figure struct {
	file    string
	heading string
	caption string
	chart   *Chart
}

func sizeFmt(v float64) string { return bytesize.Format(int64(v)) }

func pctFmt(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }

// runFigures are the time-series charts of one replay.
func runFigures(r *replay.Result, prefix string) []figure {
	var days, cum, daily, in, out []float64
	for _, d := range r.Daily {
		x := float64(d.Start.Unix()) + 43200 // mid-day
		days = append(days, x)
		cum = append(cum, d.CumulativeHitRate)
		daily = append(daily, math.NaN())
		if d.Requests > 0 {
			daily[len(daily)-1] = float64(d.Hits) / float64(d.Requests)
		}
		in = append(in, replay.Gbps(float64(d.BytesIn)))
		out = append(out, replay.Gbps(float64(d.BytesOut)))
	}
	var ot, omin, omax []float64
	for _, o := range r.Occupancy {
		ot = append(ot, float64(o.Start.Unix()))
		omin = append(omin, float64(o.Min))
		omax = append(omax, float64(o.Max))
	}
	what := fmt.Sprintf("%s, %s", r.Policy, bytesize.Format(r.Capacity))
	occ := &Chart{
		Title: "Occupancy over time: " + what, XLabel: "trace time (UTC)", YLabel: "bytes held",
		XAxis: AxisTime, YFormat: sizeFmt, YMin: 0, YMax: float64(r.Capacity) * 1.05,
		Bands:  []Band{{Name: "occupancy (min-max per sample)", X: ot, Lo: omin, Hi: omax, Color: Blue, Alpha: 200}},
		HRules: []Rule{{Value: float64(r.Capacity), Label: "capacity", Color: Black, Dashed: true}},
	}
	if r.HighWatermark > 0 {
		occ.HRules = append(occ.HRules,
			Rule{Value: r.HighWatermark * float64(r.Capacity), Label: fmt.Sprintf("high watermark %.0f%%", 100*r.HighWatermark), Color: Red},
			Rule{Value: r.LowWatermark * float64(r.Capacity), Label: fmt.Sprintf("low watermark %.0f%%", 100*r.LowWatermark), Color: Green})
	}
	cumChart := &Chart{
		Title: "Cumulative hit rate over time: " + what, XLabel: "trace time (UTC)", YLabel: "hit rate",
		XAxis: AxisTime, YFormat: pctFmt, YMin: 0, YMax: 1,
		Series: []Series{
			{Name: "cumulative hit rate", X: days, Y: cum, Color: Blue},
			{Name: "hit rate of the day", X: days, Y: daily, Color: Orange, Dashed: true},
		},
	}
	tput := &Chart{
		Title: "Daily average throughput: " + what, XLabel: "trace time (UTC)", YLabel: "Gbit/s",
		XAxis: AxisTime, YFormat: func(v float64) string { return fmt.Sprintf("%.0f", v) },
		Series: []Series{
			{Name: "out (to clients)", X: days, Y: out, Color: Blue},
			{Name: "in (from origins)", X: days, Y: in, Color: Red},
		},
	}
	if r.NICGbps > 0 {
		tput.HRules = append(tput.HRules, Rule{Value: float64(r.NICGbps), Label: fmt.Sprintf("%d Gbit/s NIC", r.NICGbps), Color: Black, Dashed: true})
	}
	return []figure{
		{prefix + "occupancy.png", "Occupancy over time", "Bytes held, sampled over the trace (lowest to highest value in each sample interval), with the capacity and, for xcache, the purge watermarks (the CMS study's Figure 7).", occ},
		{prefix + "cumulative.png", "Cumulative hit rate over time", "Hits over requests since the start of the trace, and per day (the CMS study's Figure 8, left, over time).", cumChart},
		{prefix + "throughput.png", "Daily throughput", fmt.Sprintf("Average rate per UTC day. The peak day needs %.1f Gbit/s in and %.1f Gbit/s out: a %d Gbit/s NIC.", r.PeakInGbps, r.PeakOutGbps, r.NICGbps), tput},
	}
}

// sweepFigures are the size charts of a sweep plus the recommended run's.
func sweepFigures(s Sweep) []figure {
	res := s.Result
	var cx, hit, bhit, oi, lo, hi, sdLo, sdHi []float64
	for _, p := range res.Curve {
		cx = append(cx, float64(p.Capacity))
		hit = append(hit, p.HitRate)
		bhit = append(bhit, p.ByteHitRate)
		oi = append(oi, p.OutInRatio)
		lo = append(lo, nanIfZero(p.Low))
		hi = append(hi, nanIfZero(p.High))
		sdLo = append(sdLo, p.HitRate-p.StdDev)
		sdHi = append(sdHi, p.HitRate+p.StdDev)
	}
	hitChart := &Chart{Title: "Hit rate vs cache size", XLabel: "cache size", YLabel: "hit rate", XAxis: AxisLog,
		XFormat: sizeFmt, YFormat: pctFmt, YMin: 0, YMax: 1}
	byteChart := &Chart{Title: "Byte hit rate vs cache size", XLabel: "cache size", YLabel: "byte hit rate", XAxis: AxisLog,
		XFormat: sizeFmt, YFormat: pctFmt, YMin: 0, YMax: 1}
	oiChart := &Chart{Title: "Outbound / inbound traffic vs cache size", XLabel: "cache size", YLabel: "out/in", XAxis: AxisLog,
		XFormat: sizeFmt, YFormat: func(v float64) string { return fmt.Sprintf("%.1f", v) },
		HRules: []Rule{{Value: 3, Label: "3:1 (CMS study optimum)", Color: Gray, Dashed: true}}}
	if len(cx) > 0 {
		lruName := "LRU (exact)"
		if res.Sampling != nil {
			lruName = "LRU (SHARDS estimate)"
			hitChart.Bands = append(hitChart.Bands, Band{Name: "LRU ±1 sigma of a sample", X: cx, Lo: sdLo, Hi: sdHi, Color: Blue})
		}
		hitChart.Bands = append(hitChart.Bands, Band{Name: fmt.Sprintf("XCache band: LRU at %.0f-%.0f%% of size", 100*res.LowWatermark, 100*res.HighWatermark), X: cx, Lo: lo, Hi: hi, Color: Green})
		hitChart.Series = append(hitChart.Series, Series{Name: lruName, X: cx, Y: hit, Color: Blue})
		byteChart.Series = append(byteChart.Series, Series{Name: lruName, X: cx, Y: bhit, Color: Blue})
		oiChart.Series = append(oiChart.Series, Series{Name: lruName, X: cx, Y: oi, Color: Blue})
	}
	rows := res.Rows
	var rx []float64
	for _, r := range rows {
		rx = append(rx, float64(r.Capacity))
	}
	if len(cx) == 0 { // block mode: LRU replayed at the swept sizes
		var y, by, o []float64
		for _, r := range rows {
			y, by, o = append(y, r.LRU.HitRate), append(by, r.LRU.ByteHitRate), append(o, r.LRU.OutInRatio)
		}
		hitChart.Series = append(hitChart.Series, Series{Name: "lru", X: rx, Y: y, Color: Blue, Markers: true})
		byteChart.Series = append(byteChart.Series, Series{Name: "lru", X: rx, Y: by, Color: Blue, Markers: true})
		oiChart.Series = append(oiChart.Series, Series{Name: "lru", X: rx, Y: o, Color: Blue, Markers: true})
	}
	for i, name := range res.Policies {
		if name == "lru" {
			continue
		}
		col := Palette[i%len(Palette)]
		var y, by, o []float64
		for _, r := range rows {
			p, ok := r.Policies[name]
			if !ok {
				y, by, o = append(y, math.NaN()), append(by, math.NaN()), append(o, math.NaN())
				continue
			}
			y, by, o = append(y, p.HitRate), append(by, p.ByteHitRate), append(o, p.OutInRatio)
		}
		hitChart.Series = append(hitChart.Series, Series{Name: name, X: rx, Y: y, Color: col, Markers: true})
		byteChart.Series = append(byteChart.Series, Series{Name: name, X: rx, Y: by, Color: col, Markers: true})
		oiChart.Series = append(oiChart.Series, Series{Name: name, X: rx, Y: o, Color: col, Markers: true})
	}
	rec := res.Recommendation
	hitChart.HRules = append(hitChart.HRules, Rule{Value: res.Infinite.HitRate, Label: "infinite cache", Color: Black, Dashed: true})
	if rec.XCacheCapacity > 0 {
		hitChart.VRules = append(hitChart.VRules, Rule{Value: float64(rec.XCacheCapacity), Label: "recommended " + bytesize.Format(rec.XCacheCapacity), Color: Red, Dashed: true})
	}
	if rec.Knee > 0 {
		hitChart.VRules = append(hitChart.VRules, Rule{Value: float64(rec.Knee), Label: "knee " + bytesize.Format(rec.Knee), Color: Gray, Dashed: true})
	}
	figs := []figure{
		{"hitrate.png", "Hit rate vs cache size", "LRU at every size, XCache's band between LRU at its two watermarks, the replayed policies at the swept sizes (dots), the infinite cache, the recommended size and the knee (the CMS study's Figure 8, left).", hitChart},
		{"bytehitrate.png", "Byte hit rate vs cache size", "Share of the bytes delivered that came from the cache.", byteChart},
		{"outin.png", "Outbound / inbound traffic vs cache size", "Bytes delivered to clients per byte read from origins (the CMS study's Figure 8, right).", oiChart},
	}
	if res.Recommended != nil {
		figs = append(figs, runFigures(res.Recommended, "recommended-")...)
	}
	return figs
}

func nanIfZero(v float64) float64 {
	if v == 0 {
		return math.NaN()
	}
	return v
}

// WriteRunDir writes index.html, the PNG plots and run.json for one replay.
func WriteRunDir(dir string, r Run) error {
	var text bytes.Buffer
	if err := WriteRunText(&text, r); err != nil {
		return err
	}
	title := fmt.Sprintf("hepcache sim run: %s, %s", r.Policy, bytesize.Format(r.Capacity))
	return writeDir(dir, title, text.String(), "run.json", r, runFigures(r.Result, ""))
}

// WriteSweepDir writes index.html, the PNG plots and sweep.json for a sweep.
func WriteSweepDir(dir string, s Sweep) error {
	var text bytes.Buffer
	if err := WriteSweepText(&text, s); err != nil {
		return err
	}
	return writeDir(dir, "hepcache sim sweep: cache size", text.String(), "sweep.json", s, sweepFigures(s))
}

func writeDir(dir, title, text, jsonName string, v any, figs []figure) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, v); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, jsonName), js.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	var page bytes.Buffer
	fmt.Fprintf(&page, `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>%s</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 960px; margin: 2em auto; padding: 0 1em; color: #222; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 13px; }
img { max-width: 100%%; border: 1px solid #ddd; }
figcaption { color: #555; font-size: 14px; margin-bottom: 2em; }
</style></head><body>
<h1>%s</h1>
<pre>%s</pre>
`, html.EscapeString(title), html.EscapeString(title), html.EscapeString(text))
	for _, f := range figs {
		img, err := f.chart.PNG()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.file), img, 0o644); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		fmt.Fprintf(&page, "<h2>%s</h2>\n<figure><img alt=\"%s\" src=\"data:image/png;base64,%s\">\n<figcaption>%s</figcaption></figure>\n",
			html.EscapeString(f.heading), html.EscapeString(f.heading), base64.StdEncoding.EncodeToString(img), html.EscapeString(f.caption))
	}
	fmt.Fprintf(&page, "<p>Data: <a href=\"%s\">%s</a> (JSON). Generated by hepcache sim.</p>\n</body></html>\n", jsonName, jsonName)
	if err := os.WriteFile(filepath.Join(dir, "index.html"), page.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
