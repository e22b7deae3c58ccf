// Package sweep sizes a cache: it computes the exact LRU hit rate and byte hit
// rate at every capacity in one pass of stack distances, brackets XCache
// between the LRU curves at its two watermarks, replays other policies at
// chosen sizes, and recommends a size. Huge traces are sampled with SHARDS.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/sim/policy"
	"github.com/hepcache/hepcache/internal/sim/replay"
	"github.com/hepcache/hepcache/internal/sim/trace"
)

// Config describes a sweep. Zero values take the defaults.
type Config struct {
	// Sizes are the capacities of the table and of the replayed policies.
	// Empty means a 1-2-5 series from the largest file to the footprint.
	Sizes []int64
	// Policies are replayed at every size, besides LRU which comes from the
	// curve. Default ["xcache"]; "all" in the list means every policy.
	Policies []string
	// Policy is the template for replayed policies: watermarks, purge
	// interval, S3-FIFO ratios. Name and Capacity are ignored.
	Policy policy.Config
	// Block replays in block mode (see replay.Config); the exact curve is
	// whole-file only, so in block mode LRU is replayed at each size too and
	// the recommendation is limited to the sizes swept.
	Block     bool
	BlockSize int64
	// Within is the recommendation's tolerance: the smallest size whose hit
	// rate is within this fraction of the infinite cache's. Default 0.05.
	Within float64
	// CurvePoints is the number of capacities of the dense curve (for plots).
	// Default 200.
	CurvePoints int
	// Workers run replays in parallel. Default GOMAXPROCS.
	Workers int
	// Progress, if set, receives the requests replayed so far and the total,
	// from several goroutines at once (it must be safe for concurrent use).
	Progress func(done, total int64)
}

const (
	defaultWithin      = 0.05
	defaultCurvePoints = 200
	maxAutoSizes       = 12
	// minSampledFiles is how many average files a scaled-down cache must hold
	// for a replay on a SHARDS sample to be reported.
	minSampledFiles = 100
)

// Row is the outcome at one capacity of the table.
type Row struct {
	Capacity int64 `json:"capacity"`
	// LRU is exact from the curve, an estimate when sampled, or replayed below
	// the largest file and in block mode.
	LRU Point `json:"lru"`
	// LRUStdDev is the spread (1 sigma) of LRU's hit rate across SHARDS samples.
	LRUStdDev float64 `json:"lru_hit_rate_stddev,omitempty"`
	// XCacheLow and XCacheHigh are LRU's hit rates at the low and high
	// watermark shares of the capacity: the band in which XCache's hit rate
	// lies (exactly when it checks after every request). Zero if unknown.
	XCacheLow  float64 `json:"xcache_low_bound,omitempty"`
	XCacheHigh float64 `json:"xcache_high_bound,omitempty"`
	// Policies holds the replayed policies by name.
	Policies map[string]PolicyPoint `json:"policies"`
	// TooSmallToSample is set when the capacity scaled by the SHARDS rate
	// holds fewer than 100 average files: no policy is replayed there.
	TooSmallToSample bool `json:"too_small_to_sample,omitempty"`
}

// PolicyPoint is a replayed policy's outcome at one capacity.
type PolicyPoint struct {
	HitRate float64 `json:"hit_rate"`
	// HitRateStdDev is the spread (1 sigma) across SHARDS samples.
	HitRateStdDev float64 `json:"hit_rate_stddev,omitempty"`
	ByteHitRate   float64 `json:"byte_hit_rate"`
	BytesIn       int64   `json:"bytes_in"`
	OutInRatio    float64 `json:"out_in_ratio"`
	FilesCreated  int64   `json:"files_created"`
	FilesDeleted  int64   `json:"files_deleted"`
	PeakInGbps    float64 `json:"peak_daily_in_gbps"`
	PeakOutGbps   float64 `json:"peak_daily_out_gbps"`
}

// CurvePoint is one capacity of the dense LRU curve.
type CurvePoint struct {
	Capacity    int64   `json:"capacity"`
	HitRate     float64 `json:"hit_rate"`
	ByteHitRate float64 `json:"byte_hit_rate"`
	OutInRatio  float64 `json:"out_in_ratio"`
	// Low and High are LRU's hit rates at the watermark shares (XCache's band).
	Low    float64 `json:"xcache_low_bound"`
	High   float64 `json:"xcache_high_bound"`
	StdDev float64 `json:"stddev,omitempty"`
}

// Recommendation is the suggested size.
type Recommendation struct {
	Within          float64 `json:"within"`
	InfiniteHitRate float64 `json:"infinite_hit_rate"`
	TargetHitRate   float64 `json:"target_hit_rate"`
	// LRUCapacity is the smallest LRU cache reaching the target.
	LRUCapacity int64 `json:"lru_capacity"`
	// XCacheCapacity is the disk for an XCache purging between the watermarks
	// that keeps at least LRUCapacity: LRUCapacity / low watermark.
	XCacheCapacity int64 `json:"xcache_capacity"`
	// XCacheHitRate is the hit rate of xcache replayed at XCacheCapacity.
	XCacheHitRate float64 `json:"xcache_hit_rate"`
	// Knee is where the hit-rate curve bends (Kneedle, linear axes).
	Knee        int64   `json:"knee"`
	KneeHitRate float64 `json:"knee_hit_rate"`
	// NICGbps covers the peak day of the replay at XCacheCapacity.
	NICGbps int `json:"nic_gbps"`
	// Coarse is set when the sizes come from the swept list (block mode).
	Coarse bool `json:"coarse,omitempty"`
}

// Sampling states the SHARDS sampling and its error.
type Sampling struct {
	Rate    float64 `json:"rate"`
	Samples int     `json:"samples"`
	// MaxStdDev is the largest 1-sigma spread of a single sample's hit rate
	// over the table's sizes and policies; the reported estimates pool the
	// samples, whose standard error is MaxStdDev / sqrt(Samples).
	MaxStdDev     float64 `json:"max_hit_rate_stddev"`
	StandardError float64 `json:"hit_rate_standard_error"`
	// HeavyFiles is the number of heavy hitters kept whole in every sample.
	HeavyFiles int `json:"heavy_files"`
}

func estFiles(samples []*trace.Trace) int64 {
	var sum int64
	for _, s := range samples {
		_, f := s.Estimated()
		sum += f
	}
	return sum / int64(len(samples))
}

func heavyFiles(tr *trace.Trace) int {
	n := 0
	for _, w := range tr.Weight {
		if w == 1 && tr.Scale > 1 {
			n++
		}
	}
	return n
}

// Result is a sweep's outcome.
type Result struct {
	Mode        string  `json:"mode"`
	Requests    int64   `json:"requests"`
	Files       int64   `json:"files"`
	Days        float64 `json:"days"`
	BytesOut    int64   `json:"bytes_out"`
	Footprint   int64   `json:"footprint"`
	MaxFileSize int64   `json:"max_file_size"`
	Infinite    Point   `json:"infinite"`
	// HighWatermark and LowWatermark are those of the xcache model.
	HighWatermark  float64        `json:"high_watermark"`
	LowWatermark   float64        `json:"low_watermark"`
	Policies       []string       `json:"policies"`
	Rows           []Row          `json:"rows"`
	Curve          []CurvePoint   `json:"curve"`
	Recommendation Recommendation `json:"recommendation"`
	Sampling       *Sampling      `json:"sampling,omitempty"`
	// Recommended is the xcache replay at the recommended size, with its daily
	// series and occupancy over time.
	Recommended *replay.Result `json:"recommended"`
}

// Run sweeps a trace. samples holds either the whole trace or several
// independent SHARDS samples of it (trace.Samples, trace.ReadFileSampled).
func Run(ctx context.Context, samples []*trace.Trace, cfg Config) (*Result, error) {
	if len(samples) == 0 || samples[0].Len() == 0 {
		return nil, errors.New("sweep: empty trace")
	}
	m := samples[0].M()
	for _, s := range samples {
		if s.M() != m {
			return nil, errors.New("sweep: samples taken at different rates")
		}
	}
	if m == 1 && len(samples) != 1 {
		return nil, fmt.Errorf("sweep: %d full traces; want one, or SHARDS samples", len(samples))
	}
	sampled := m > 1
	c := cfg
	if c.Within == 0 {
		c.Within = defaultWithin
	}
	if c.CurvePoints <= 0 {
		c.CurvePoints = defaultCurvePoints
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	pols, err := policyList(c.Policies)
	if err != nil {
		return nil, err
	}
	tmpl := c.Policy
	tmpl.Name, tmpl.Capacity = "xcache", 1
	tmpl.EnsureDefaults()
	if err := tmpl.Validate(); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	lo, hi := tmpl.LowWatermark, tmpl.HighWatermark

	// One curve per sample (the whole trace when not sampling).
	curves := make([]*Curve, len(samples))
	for i, s := range samples {
		cv, err := NewCurve(ctx, s, nil)
		if err != nil {
			return nil, err
		}
		curves[i] = cv
	}
	est := &estimate{curves: curves}
	res := &Result{
		Mode:          "whole-file",
		Requests:      est.requests(),
		Files:         estFiles(samples),
		Days:          samples[0].Days(),
		BytesOut:      est.infinite().BytesOut,
		Footprint:     est.footprint(),
		MaxFileSize:   est.minCapacity(),
		Infinite:      est.infinite(),
		HighWatermark: hi,
		LowWatermark:  lo,
		Policies:      pols,
	}
	if c.Block {
		res.Mode = "block"
	}
	sizes := c.Sizes
	if len(sizes) == 0 {
		sizes = autoSizes(res.MaxFileSize, res.Footprint)
	}
	sizes = slices.Clone(sizes)
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	if sampled && sizes[0] < res.MaxFileSize {
		return nil, fmt.Errorf("sweep: size %d is below the largest file scaled by the sampling rate (%d); sample less or drop small sizes", sizes[0], res.MaxFileSize)
	}

	// Dense curve and the table's LRU columns.
	if !c.Block {
		for _, capa := range logSpace(res.MaxFileSize, res.Footprint, c.CurvePoints) {
			p, sd := est.atSD(capa)
			res.Curve = append(res.Curve, CurvePoint{Capacity: capa, HitRate: p.HitRate, ByteHitRate: p.ByteHitRate,
				OutInRatio: p.OutInRatio, Low: est.hitRate(scale(capa, lo)), High: est.hitRate(scale(capa, hi)), StdDev: sd})
		}
	}
	for _, capa := range sizes {
		row := Row{Capacity: capa, Policies: map[string]PolicyPoint{}}
		if !c.Block && capa >= res.MaxFileSize {
			row.LRU, row.LRUStdDev = est.atSD(capa)
			if l := scale(capa, lo); l >= res.MaxFileSize {
				row.XCacheLow, row.XCacheHigh = est.hitRate(l), est.hitRate(scale(capa, hi))
			}
		}
		res.Rows = append(res.Rows, row)
	}

	// Recommendation from the curve (exact, or the sample mean).
	rec := Recommendation{Within: c.Within, InfiniteHitRate: res.Infinite.HitRate}
	rec.TargetHitRate = (1 - c.Within) * rec.InfiniteHitRate
	if !c.Block {
		rec.LRUCapacity = est.smallestFor(rec.TargetHitRate, res.MaxFileSize, res.Footprint)
		rec.XCacheCapacity = int64(math.Ceil(float64(rec.LRUCapacity) / lo))
		rec.Knee, rec.KneeHitRate = est.knee(res.MaxFileSize, res.Footprint)
	}

	// Replays: every policy at every size, LRU too where the curve cannot
	// answer, xcache at the recommended size, and in block mode the infinite
	// cache (the curve's ceiling is whole-file). Each runs on every sample.
	const (
		recommended = -1
		ceiling     = -2
	)
	type job struct {
		row  int
		name string
		capa int64
	}
	var jobs []job
	// A sampled replay runs a cache scaled down by the rate; holding only a
	// few files, it would be too coarse to mean anything.
	minSampled := int64(minSampledFiles * float64(res.Footprint) / float64(max(1, res.Files)))
	for i, row := range res.Rows {
		if sampled && row.Capacity < minSampled {
			res.Rows[i].TooSmallToSample = true
			continue
		}
		if c.Block || row.Capacity < res.MaxFileSize {
			jobs = append(jobs, job{i, "lru", row.Capacity}) // beyond the curve's reach
		}
		for _, p := range pols {
			if p != "lru" { // LRU comes from the curve, or was queued above
				jobs = append(jobs, job{i, p, row.Capacity})
			}
		}
	}
	if c.Block {
		jobs = append(jobs, job{ceiling, "infinite", res.Footprint})
	} else {
		jobs = append(jobs, job{recommended, "xcache", rec.XCacheCapacity})
	}
	merged, spread, err := runJobs(ctx, samples, len(jobs), c, func(j int) (string, int64) { return jobs[j].name, jobs[j].capa })
	if err != nil {
		return nil, err
	}
	for j, jb := range jobs {
		r := merged[j]
		r.Capacity = jb.capa
		switch jb.row {
		case recommended:
			res.Recommended = r
			rec.XCacheHitRate = r.HitRate
			rec.NICGbps = r.NICGbps
			continue
		case ceiling:
			res.Infinite = Point{Capacity: jb.capa, Requests: r.Requests, Hits: r.Hits, HitRate: r.HitRate,
				ByteHitRate: r.ByteHitRate, BytesOut: r.BytesOut, BytesHit: r.BytesHit, BytesIn: r.BytesIn,
				OutInRatio: r.OutInRatio, FilesCreated: r.FilesCreated}
			rec.InfiniteHitRate = r.HitRate
			rec.TargetHitRate = (1 - c.Within) * r.HitRate
			continue
		}
		row := &res.Rows[jb.row]
		row.Policies[jb.name] = PolicyPoint{HitRate: r.HitRate, HitRateStdDev: spread[j], ByteHitRate: r.ByteHitRate,
			BytesIn: r.BytesIn, OutInRatio: r.OutInRatio, FilesCreated: r.FilesCreated, FilesDeleted: r.FilesDeleted,
			PeakInGbps: r.PeakInGbps, PeakOutGbps: r.PeakOutGbps}
		if jb.name == "lru" {
			row.LRU = Point{Capacity: jb.capa, Requests: r.Requests, Hits: r.Hits, HitRate: r.HitRate, ByteHitRate: r.ByteHitRate,
				BytesOut: r.BytesOut, BytesHit: r.BytesHit, BytesIn: r.BytesIn, OutInRatio: r.OutInRatio,
				FilesCreated: r.FilesCreated, FilesDeleted: r.FilesDeleted}
			row.LRUStdDev = spread[j]
		}
	}
	if c.Block {
		blockRecommendation(res, &rec)
	}
	res.Recommendation = rec
	if sampled {
		s := &Sampling{Rate: 1 / float64(m), Samples: len(samples), HeavyFiles: heavyFiles(samples[0])}
		for _, r := range res.Rows {
			s.MaxStdDev = max(s.MaxStdDev, r.LRUStdDev)
			for _, p := range r.Policies {
				s.MaxStdDev = max(s.MaxStdDev, p.HitRateStdDev)
			}
		}
		s.StandardError = s.MaxStdDev / math.Sqrt(float64(len(samples)))
		res.Sampling = s
	}
	return res, nil
}

// blockRecommendation picks, among the swept sizes, the smallest where the
// replayed xcache (else LRU) reaches the target, and the knee of those points.
func blockRecommendation(res *Result, rec *Recommendation) {
	rec.Coarse = true
	name := "lru"
	if slices.Contains(res.Policies, "xcache") {
		name = "xcache"
	}
	hr := func(r Row) float64 {
		if p, ok := r.Policies[name]; ok {
			return p.HitRate
		}
		return r.LRU.HitRate
	}
	for _, r := range res.Rows {
		if hr(r) >= rec.TargetHitRate {
			rec.XCacheCapacity, rec.XCacheHitRate = r.Capacity, hr(r)
			rec.LRUCapacity = int64(float64(r.Capacity) * res.LowWatermark)
			break
		}
	}
	n := len(res.Rows)
	if n == 0 {
		return
	}
	x0, x1 := float64(res.Rows[0].Capacity), float64(res.Rows[n-1].Capacity)
	y0, y1 := hr(res.Rows[0]), hr(res.Rows[n-1])
	best := math.Inf(-1)
	for _, r := range res.Rows {
		if x1 <= x0 || y1 <= y0 {
			break
		}
		s := (hr(r)-y0)/(y1-y0) - (float64(r.Capacity)-x0)/(x1-x0)
		if s > best {
			best, rec.Knee, rec.KneeHitRate = s, r.Capacity, hr(r)
		}
	}
}

func scale(v int64, f float64) int64 { return int64(float64(v) * f) }

func policyList(names []string) ([]string, error) {
	if len(names) == 0 {
		return []string{"xcache"}, nil
	}
	var out []string
	for _, n := range names {
		n = policy.Canonical(n)
		if n == "" {
			continue
		}
		if n == "all" {
			for _, p := range policy.Names() {
				if !slices.Contains(out, p) {
					out = append(out, p)
				}
			}
			continue
		}
		if !slices.Contains(policy.Names(), n) {
			return nil, fmt.Errorf("sweep: unknown policy %q (want %v or all)", n, policy.Names())
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// autoSizes returns a 1-2-5 series of capacities covering [lo, hi], thinned
// to at most maxAutoSizes values.
func autoSizes(lo, hi int64) []int64 {
	var all []int64
	for e := 0.0; e < 19; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= float64(lo) && v <= float64(hi)*2 {
				all = append(all, int64(v))
			}
		}
	}
	if len(all) == 0 {
		return []int64{max(lo, hi)}
	}
	for len(all) > maxAutoSizes {
		all = all[len(all)-maxAutoSizes:] // small caches matter least: drop them first
	}
	return all
}

// logSpace returns n capacities spaced evenly on a log scale over [lo, hi].
func logSpace(lo, hi int64, n int) []int64 {
	if hi <= lo || n < 2 {
		return []int64{lo}
	}
	out := make([]int64, 0, n)
	a, b := math.Log(float64(lo)), math.Log(float64(hi))
	for i := range n {
		v := int64(math.Round(math.Exp(a + (b-a)*float64(i)/float64(n-1))))
		v = min(max(v, lo), hi)
		if len(out) == 0 || v > out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

// runJobs replays n jobs (policy name and full-trace capacity) on every
// sample, in parallel, and returns per job the merged estimate and the spread
// of the samples' hit rates.
func runJobs(ctx context.Context, samples []*trace.Trace, n int, c Config,
	job func(int) (string, int64)) ([]*replay.Result, []float64, error) {
	k := len(samples)
	// Shared occupancy grid so that Merge can add the samples' series up.
	origin, end := samples[0].Start(), samples[0].End()
	for _, s := range samples {
		origin, end = min(origin, s.Start()), max(end, s.End())
	}
	every := time.Duration(max(int64(time.Second), (end-origin)/2000+1))
	nextUse := make([]func() []int32, k) // only opt needs it
	var total int64
	for i, s := range samples {
		nextUse[i] = sync.OnceValue(s.NextUse)
		total += int64(n) * int64(s.Len())
	}
	// Each task writes only its own slots; wg.Wait orders those writes before
	// the reads below.
	results := make([]*replay.Result, n*k)
	errs := make([]error, n*k)
	var done atomic.Int64
	tasks := make(chan int)
	var wg sync.WaitGroup
	for range min(c.Workers, n*k) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range tasks {
				j, si := t/k, t%k
				name, capa := job(j)
				pc := c.Policy
				pc.Name = name
				pc.Capacity = max(1, capa/samples[si].M()) // a SHARDS sample is a scaled-down cache
				if name == "opt" {
					pc.Next = nextUse[si]()
				}
				rc := replay.Config{Policy: pc, Block: c.Block, BlockSize: c.BlockSize, Origin: origin, SampleEvery: every}
				if c.Progress != nil {
					var last int64
					rc.Progress = func(d int) {
						c.Progress(done.Add(int64(d)-last), total)
						last = int64(d)
					}
				}
				results[t], errs[t] = replay.Run(ctx, samples[si], rc)
			}
		}()
	}
	for t := range n * k {
		if ctx.Err() != nil {
			break
		}
		tasks <- t
	}
	close(tasks)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("sweep: %w", err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	merged := make([]*replay.Result, n)
	spread := make([]float64, n)
	for j := range n {
		rs := results[j*k : (j+1)*k]
		merged[j] = replay.Merge(rs)
		if k > 1 {
			var mean, ss float64
			for _, r := range rs {
				mean += r.HitRate / float64(k)
			}
			for _, r := range rs {
				ss += (r.HitRate - mean) * (r.HitRate - mean)
			}
			spread[j] = math.Sqrt(ss / float64(k-1))
		}
	}
	return merged, spread, nil
}
