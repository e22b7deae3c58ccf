// Package report presents simulator results: aligned tables for a terminal,
// JSON for scripts, and an HTML page with PNG plots drawn by the standard
// library (no external assets, no plotting dependency).
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hepcache/hepcache/internal/sim/bytesize"
	"github.com/hepcache/hepcache/internal/sim/replay"
	"github.com/hepcache/hepcache/internal/sim/sweep"
	"github.com/hepcache/hepcache/internal/sim/trace"
)

// TraceSummary describes the trace a result came from.
type TraceSummary struct {
	Source     string         `json:"source"`
	Accesses   int            `json:"accesses"`
	Files      int            `json:"files"`
	Days       float64        `json:"days"`
	Start      time.Time      `json:"start"`
	End        time.Time      `json:"end"`
	Footprint  int64          `json:"footprint"`
	MaxFile    int64          `json:"max_file_size"`
	Info       trace.ReadInfo `json:"read"`
	SampleRate float64        `json:"sample_rate"`
	Samples    int            `json:"samples"`
}

// Summarize describes tr, read from source.
func Summarize(source string, tr *trace.Trace) TraceSummary {
	return TraceSummary{
		Source: source, Accesses: tr.Len(), Files: tr.NumFiles(), Days: tr.Days(),
		Start: time.Unix(0, tr.Start()).UTC(), End: time.Unix(0, tr.End()).UTC(),
		Footprint: tr.Footprint(), MaxFile: tr.MaxFileSize(), Info: tr.Info, SampleRate: 1, Samples: 1,
	}
}

// Run is the JSON form of `hepcache sim run`: the replay's fields at the top
// level, the trace under "trace".
type Run struct {
	*replay.Result
	Trace TraceSummary `json:"trace"`
}

// Sweep is the JSON form of `hepcache sim sweep`.
type Sweep struct {
	*sweep.Result
	Trace TraceSummary `json:"trace"`
}

// WriteJSON writes v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("report: write json: %w", err)
	}
	return nil
}

func pct(f float64) string { return fmt.Sprintf("%.1f %%", 100*f) }

func count(v int64) string {
	s := fmt.Sprint(v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func ratioStr(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}

// TraceLine is a one-line description of a trace.
func TraceLine(t TraceSummary) string {
	s := fmt.Sprintf("%s: %s accesses of %s files (%s) over %.1f days from %s", t.Source, count(int64(t.Accesses)),
		count(int64(t.Files)), bytesize.Format(t.Footprint), t.Days, t.Start.Format("2006-01-02"))
	if t.Info.Format != "" {
		s += fmt.Sprintf(", %s", t.Info.Format)
	}
	if t.Info.Bad > 0 {
		s += fmt.Sprintf(", %d bad lines", t.Info.Bad)
	}
	if t.SampleRate < 1 {
		s += fmt.Sprintf(", SHARDS %d samples at rate %g", t.Samples, t.SampleRate)
	}
	return s
}

// WriteRunText writes a replay's outcome as an aligned key/value table.
func WriteRunText(w io.Writer, r Run) error {
	res := r.Result
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	p("trace", "%s", TraceLine(r.Trace))
	if bs := r.Trace.Info.BadSummary(); bs != "" {
		p("bad lines", "%s", bs)
	}
	pol := fmt.Sprintf("%s, %s, %s", res.Policy, bytesize.Format(res.Capacity), res.Mode)
	if res.BlockSize > 0 {
		pol += " (" + bytesize.Format(res.BlockSize) + " blocks)"
	}
	if res.HighWatermark > 0 {
		pol += fmt.Sprintf(", purge %.0f %% -> %.0f %%", 100*res.HighWatermark, 100*res.LowWatermark)
	}
	p("policy", "%s", pol)
	p("requests", "%s", count(res.Requests))
	p("hits", "%s  (hit rate %s, byte hit rate %s)", count(res.Hits), pct(res.HitRate), pct(res.ByteHitRate))
	p("bytes out", "%s  (delivered to clients)", bytesize.Format(res.BytesOut))
	p("bytes in", "%s  (read from origins over the WAN)", bytesize.Format(res.BytesIn))
	p("out/in", "%s", ratioStr(res.OutInRatio))
	p("WAN saved", "%s per day", bytesize.Format(int64(res.WANSavedPerDay)))
	p("files", "%s created, %s deleted (%s)", count(res.FilesCreated), count(res.FilesDeleted), bytesize.Format(res.BytesDeleted))
	p("occupancy", "peak %s, final %s", bytesize.Format(res.PeakUsed), bytesize.Format(res.FinalUsed))
	p("throughput in", "mean %.2f Gbit/s, peak day %.2f Gbit/s", res.MeanInGbps, res.PeakInGbps)
	p("throughput out", "mean %.2f Gbit/s, peak day %.2f Gbit/s", res.MeanOutGbps, res.PeakOutGbps)
	if res.NICGbps > 0 {
		p("NIC", "%d Gbit/s covers the peak day", res.NICGbps)
	} else {
		p("NIC", "none single: the peak day exceeds 800 Gbit/s")
	}
	if n := len(res.Daily); n > 0 {
		var parts []string
		for _, i := range []int{n / 4, n / 2, 3 * n / 4, n - 1} {
			d := res.Daily[i]
			parts = append(parts, fmt.Sprintf("%s %s", d.Start.Format("01-02"), pct(d.CumulativeHitRate)))
		}
		p("cumulative hit rate", "%s", strings.Join(slices.Compact(parts), ", "))
	}
	if res.Elapsed > 0 {
		p("replay time", "%v (%.1f M requests/s)", res.Elapsed.Round(time.Millisecond), float64(res.Requests)/res.Elapsed.Seconds()/1e6)
	}
	return tw.Flush()
}

// WriteSweepText writes the sweep table, the infinite cache, the
// recommendation and the sampling error.
func WriteSweepText(w io.Writer, s Sweep) error {
	res := s.Result
	fmt.Fprintf(w, "trace: %s\n", TraceLine(s.Trace))
	if bs := s.Trace.Info.BadSummary(); bs != "" {
		fmt.Fprintf(w, "bad lines: %s\n", bs)
	}
	switch {
	case res.Mode == "block":
		fmt.Fprintf(w, "mode: block; LRU replayed at each size")
	case res.Sampling != nil:
		fmt.Fprintf(w, "mode: whole-file; LRU estimated from %d SHARDS samples (mean ± 1 sigma of one sample)", res.Sampling.Samples)
	default:
		fmt.Fprintf(w, "mode: whole-file; LRU exact at every size (one pass of stack distances)")
	}
	fmt.Fprintf(w, "\nXCache band: LRU at %.0f %% .. %.0f %% of the capacity (the watermarks)\n\n", 100*res.LowWatermark, 100*res.HighWatermark)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"capacity", "LRU hit", "byte hit", "out/in", "created", "deleted", "XCache band"}
	others := slices.DeleteFunc(slices.Clone(res.Policies), func(p string) bool { return p == "lru" })
	head = append(head, others...)
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, row := range res.Rows {
		band := "-"
		if row.XCacheHigh > 0 {
			band = fmt.Sprintf("%.1f-%.1f %%", 100*row.XCacheLow, 100*row.XCacheHigh)
		}
		lru := pct(row.LRU.HitRate)
		if row.LRUStdDev > 0 {
			lru = fmt.Sprintf("%.1f±%.1f %%", 100*row.LRU.HitRate, 100*row.LRUStdDev)
		}
		cells := []string{bytesize.Format(row.Capacity), lru, pct(row.LRU.ByteHitRate), ratioStr(row.LRU.OutInRatio),
			count(row.LRU.FilesCreated), count(row.LRU.FilesDeleted), band}
		for _, p := range others {
			pp, ok := row.Policies[p]
			switch {
			case !ok:
				cells = append(cells, "-")
			case pp.HitRateStdDev > 0:
				cells = append(cells, fmt.Sprintf("%.1f±%.1f %%", 100*pp.HitRate, 100*pp.HitRateStdDev))
			default:
				cells = append(cells, pct(pp.HitRate))
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	inf := res.Infinite
	fmt.Fprintf(w, "\ninfinite cache: hit rate %s, byte hit rate %s, out/in %s, footprint %s\n",
		pct(inf.HitRate), pct(inf.ByteHitRate), ratioStr(inf.OutInRatio), bytesize.Format(res.Footprint))
	rec := res.Recommendation
	if rec.XCacheCapacity > 0 {
		fmt.Fprintf(w, "recommendation: within %.0f %% of the infinite cache (hit rate >= %s):\n", 100*rec.Within, pct(rec.TargetHitRate))
		if rec.Coarse {
			fmt.Fprintf(w, "  smallest swept size reaching it: %s (hit rate %s)\n", bytesize.Format(rec.XCacheCapacity), pct(rec.XCacheHitRate))
		} else {
			fmt.Fprintf(w, "  LRU needs %s; XCache purging %.0f->%.0f %% needs a %s disk (replayed: hit rate %s)\n",
				bytesize.Format(rec.LRUCapacity), 100*res.HighWatermark, 100*res.LowWatermark,
				bytesize.Format(rec.XCacheCapacity), pct(rec.XCacheHitRate))
		}
		if rec.NICGbps > 0 {
			fmt.Fprintf(w, "  NIC: %d Gbit/s covers its peak day\n", rec.NICGbps)
		}
	} else {
		fmt.Fprintf(w, "recommendation: no swept size reaches %s; sweep larger sizes\n", pct(rec.TargetHitRate))
	}
	if rec.Knee > 0 {
		fmt.Fprintf(w, "knee of the curve: %s (hit rate %s)\n", bytesize.Format(rec.Knee), pct(rec.KneeHitRate))
	}
	if sm := res.Sampling; sm != nil {
		fmt.Fprintf(w, "sampling: SHARDS, 1 in %.0f files by hash plus the %d most read files kept whole, %d independent samples\n",
			1/sm.Rate, sm.HeavyFiles, sm.Samples)
		fmt.Fprintf(w, "sampling error: one sample's hit rate spreads by up to %.2f points (1 sigma); the pooled estimate's standard error is about %.2f points\n",
			100*sm.MaxStdDev, 100*sm.StandardError)
		if slices.ContainsFunc(res.Rows, func(r sweep.Row) bool { return r.TooSmallToSample }) {
			fmt.Fprintf(w, "  (-: the scaled-down cache holds under 100 files, too few to replay a sample)\n")
		}
	}
	return nil
}
