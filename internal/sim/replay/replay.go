// Package replay runs a trace through one cache policy and measures what a
// site admin sizes a cache by: hit rates, WAN traffic in and out, files created
// and deleted, daily throughput and the NIC it needs, occupancy over time.
package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hepcache/hepcache/internal/sim/invariants"
	"github.com/hepcache/hepcache/internal/sim/policy"
	"github.com/hepcache/hepcache/internal/sim/trace"
)

const (
	day = int64(24 * time.Hour)
	// defaultBlockSize is XCache's pfc.blocksize default in 5.5/5.6 (128 KiB).
	defaultBlockSize = 128 << 10
	// defaultSamples is the number of occupancy samples over the trace: enough
	// for a plot a few thousand pixels wide.
	defaultSamples = 2000
	// progressEvery is how many requests pass between progress reports and
	// context checks: rare enough to cost nothing, often enough for ^C.
	progressEvery = 1 << 16
)

// Config describes one replay. Policy.NumFiles and (for opt) Policy.Next are
// filled from the trace.
type Config struct {
	// Policy selects the policy and its capacity.
	Policy policy.Config
	// Block selects block mode: a request needs only the blocks covering the
	// bytes it read (a prefix of the file: traces carry no offsets) and a miss
	// fetches only missing blocks. Otherwise a miss fetches the whole file.
	Block bool
	// BlockSize is the block size in bytes for block mode. Default 128 KiB.
	BlockSize int64
	// SampleEvery is the trace time between occupancy samples. Zero means the
	// trace span / 2000.
	SampleEvery time.Duration
	// Origin anchors the occupancy sample grid (Unix ns); zero means the first
	// request. Runs over SHARDS samples of one trace share it so Merge can add
	// their samples up.
	Origin int64
	// Progress, if set, is called from the replaying goroutine with the number
	// of requests done, every 65536 requests and at the end.
	Progress func(done int)
}

// Day holds the counters of one UTC day.
type Day struct {
	Start    time.Time `json:"start"`
	Requests int64     `json:"requests"`
	Hits     int64     `json:"hits"`
	BytesOut int64     `json:"bytes_out"`
	BytesHit int64     `json:"bytes_hit"`
	BytesIn  int64     `json:"bytes_in"`
	// CumulativeHitRate is hits / requests from the start of the trace to the
	// end of this day, as in the CMS study's Figure 8.
	CumulativeHitRate float64 `json:"cumulative_hit_rate"`
}

// Sample is the cache occupancy over one sampling interval.
type Sample struct {
	Start time.Time `json:"start"`
	Min   int64     `json:"min"`
	Max   int64     `json:"max"`
	Last  int64     `json:"last"`
}

// Result is the outcome of one replay. Rates are fractions in [0, 1].
type Result struct {
	Policy        string  `json:"policy"`
	Capacity      int64   `json:"capacity"`
	Mode          string  `json:"mode"`
	BlockSize     int64   `json:"block_size,omitempty"`
	HighWatermark float64 `json:"high_watermark,omitempty"`
	LowWatermark  float64 `json:"low_watermark,omitempty"`

	Requests    int64   `json:"requests"`
	Hits        int64   `json:"hits"`
	HitRate     float64 `json:"hit_rate"`
	ByteHitRate float64 `json:"byte_hit_rate"`
	// BytesIn is what the cache read from origins (WAN), BytesOut what it
	// delivered to clients, BytesHit the part of BytesOut served from disk.
	BytesIn  int64 `json:"bytes_in"`
	BytesOut int64 `json:"bytes_out"`
	BytesHit int64 `json:"bytes_hit"`
	// OutInRatio is BytesOut / BytesIn (3:1 at the CMS study's optimum).
	OutInRatio float64 `json:"out_in_ratio"`
	// WANSavedPerDay is (BytesOut - BytesIn) / days: what the WAN carries less
	// than without a cache.
	WANSavedPerDay float64 `json:"wan_saved_bytes_per_day"`

	FilesCreated int64 `json:"files_created"`
	FilesDeleted int64 `json:"files_deleted"`
	BytesDeleted int64 `json:"bytes_deleted"`
	Purges       int64 `json:"purges,omitempty"`
	FinalUsed    int64 `json:"final_used"`
	PeakUsed     int64 `json:"peak_used"`

	Days float64 `json:"days"`
	// Throughput in Gbit/s: daily averages (mean over the trace, peak day).
	MeanInGbps  float64 `json:"mean_daily_in_gbps"`
	MeanOutGbps float64 `json:"mean_daily_out_gbps"`
	PeakInGbps  float64 `json:"peak_daily_in_gbps"`
	PeakOutGbps float64 `json:"peak_daily_out_gbps"`
	// NICGbps is the smallest standard NIC speed covering the peak day's
	// average in and out rates (full duplex).
	NICGbps int `json:"nic_gbps"`

	Elapsed time.Duration `json:"elapsed_ns"`

	Daily     []Day    `json:"daily"`
	Occupancy []Sample `json:"occupancy"`
}

// nicSpeeds are the Ethernet speeds a server NIC is bought in, Gbit/s.
var nicSpeeds = []int{1, 10, 25, 40, 50, 100, 200, 400, 800}

// NIC returns the smallest standard NIC speed (Gbit/s) at or above gbps, or 0
// if none is.
func NIC(gbps float64) int {
	for _, s := range nicSpeeds {
		if float64(s) >= gbps {
			return s
		}
	}
	return 0
}

// Run replays tr through the policy cfg describes.
func Run(ctx context.Context, tr *trace.Trace, cfg Config) (*Result, error) {
	pc := cfg.Policy
	pc.NumFiles = tr.NumFiles()
	if policy.Canonical(pc.Name) == "opt" && pc.Next == nil {
		pc.Next = tr.NextUse()
	}
	p, err := policy.New(&pc)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	pc.EnsureDefaults()
	return RunPolicy(ctx, tr, p, pc, cfg)
}

// errNoTrace is returned for an empty trace.
var errNoTrace = errors.New("replay: empty trace")

// RunPolicy replays tr through an existing policy p built from pc.
func RunPolicy(ctx context.Context, tr *trace.Trace, p policy.Policy, pc policy.Config, cfg Config) (*Result, error) {
	if tr.Len() == 0 {
		return nil, errNoTrace
	}
	bs := cfg.BlockSize
	if bs <= 0 {
		bs = defaultBlockSize
	}
	res := &Result{Policy: pc.Name, Capacity: pc.Capacity, Mode: "whole-file"}
	if cfg.Block {
		res.Mode, res.BlockSize = "block", bs
	}
	if pc.Name == "xcache" {
		res.HighWatermark, res.LowWatermark = pc.HighWatermark, pc.LowWatermark
	}
	start := time.Now()

	t0 := tr.Start()
	every := int64(cfg.SampleEvery)
	if every <= 0 {
		every = max(int64(time.Second), (tr.End()-t0)/defaultSamples+1)
	}
	origin := t0
	if cfg.Origin != 0 && cfg.Origin <= t0 {
		origin = cfg.Origin
	}
	times, files, reads, sizes := tr.Time, tr.File, tr.Bytes, tr.Size
	block := cfg.Block
	// A SHARDS sample (1 in m files, each standing for w files) replays as a
	// cache scaled down by m: a file sampled by hash (w = m) keeps its size, a
	// heavy hitter kept whole (w = 1) shrinks to 1/m of it. Requests count w
	// times, bytes m times, occupancy m times.
	m := tr.M()
	weighted := tr.Weight != nil
	if weighted {
		sizes = make([]int64, tr.NumFiles())
		for f, s := range tr.Size {
			sizes[f] = s * int64(tr.Weight[f]) / m
		}
	}

	var cur Day
	curDay := floorDay(t0)
	cur.Start = time.Unix(0, curDay).UTC()
	nextDay := curDay + day
	nextSample := origin + ((t0-origin)/every+1)*every
	used := p.Used()
	smp := Sample{Start: time.Unix(0, nextSample-every).UTC(), Min: used * m, Max: used * m}
	var created int64

	for i := range files {
		t := times[i]
		if t >= nextDay || t >= nextSample {
			for t >= nextDay {
				res.Daily = append(res.Daily, cur)
				cur = Day{Start: time.Unix(0, nextDay).UTC()}
				nextDay += day
			}
			if t >= nextSample {
				smp.Last = used * m
				res.Occupancy = append(res.Occupancy, smp)
				k := (t - nextSample) / every
				nextSample += (k + 1) * every
				smp = Sample{Start: time.Unix(0, nextSample-every).UTC(), Min: used * m, Max: used * m}
			}
		}
		id := files[i]
		r := reads[i]
		w := int64(1)
		if weighted {
			w = int64(tr.Weight[id])
			r = r * w / m
		}
		need := sizes[id]
		if block {
			need = min(need, (r+bs-1)/bs*bs)
		}
		need = max(need, 1) // an empty file or read still occupies a request's worth
		had, stored := p.Access(id, need, t)
		var hitBytes, in int64
		if had >= need {
			cur.Hits += w
			hitBytes = r
		} else {
			hitBytes = min(had, r)
			if stored {
				in = need - had
				if had == 0 {
					created += w
				}
			} else {
				in = r - hitBytes
			}
		}
		cur.Requests += w
		cur.BytesOut += r * m
		cur.BytesHit += hitBytes * m
		cur.BytesIn += in * m
		used = p.Used()
		if invariants.Enabled {
			checkAccess(pc, i, had, need, stored, used)
		}
		smp.Min = min(smp.Min, used*m)
		smp.Max = max(smp.Max, used*m)
		if i&(progressEvery-1) == progressEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("replay %s: %w", pc.Name, err)
			}
			if cfg.Progress != nil {
				cfg.Progress(i + 1)
			}
		}
	}
	res.Daily = append(res.Daily, cur)
	smp.Last = used * m
	res.Occupancy = append(res.Occupancy, smp)
	if cfg.Progress != nil {
		cfg.Progress(tr.Len())
	}

	st := p.Stats()
	res.FilesCreated, res.FilesDeleted, res.BytesDeleted, res.Purges = created, st.Evicted, st.EvictedBytes*m, st.Purges
	if weighted {
		// Evictions are the policy's business and carry no weight; heavy
		// hitters are rarely evicted, so each stands for m files.
		res.FilesDeleted *= m
	}
	res.Capacity = pc.Capacity * m
	res.FinalUsed = used * m
	res.Days = tr.Days()
	res.derive()
	res.Elapsed = time.Since(start)
	return res, nil
}

// checkAccess panics if a policy broke the contract of policy.Policy: it is
// a programmer's bug, found only in builds with the invariants tag.
func checkAccess(pc policy.Config, i int, had, need int64, stored bool, used int64) {
	switch {
	case had < 0:
		panic(fmt.Sprintf("replay: %s request %d: had %d bytes", pc.Name, i, had))
	case pc.Name != "infinite" && used > pc.Capacity:
		panic(fmt.Sprintf("replay: %s request %d: %d bytes held, capacity %d", pc.Name, i, used, pc.Capacity))
	case stored && used < need:
		panic(fmt.Sprintf("replay: %s request %d: stored %d bytes but holds %d", pc.Name, i, need, used))
	case pc.Name != "opt" && pc.Name != "admit2" && need <= pc.Capacity && !stored:
		panic(fmt.Sprintf("replay: %s request %d: %d bytes fit but were not stored", pc.Name, i, need))
	}
}

// derive computes the totals from the daily counters and every rate from the
// totals.
func (res *Result) derive() {
	res.Requests, res.Hits, res.BytesOut, res.BytesHit, res.BytesIn = 0, 0, 0, 0, 0
	var peakIn, peakOut int64
	for i := range res.Daily {
		d := &res.Daily[i]
		res.Requests += d.Requests
		res.Hits += d.Hits
		res.BytesOut += d.BytesOut
		res.BytesHit += d.BytesHit
		res.BytesIn += d.BytesIn
		d.CumulativeHitRate = ratio(res.Hits, res.Requests)
		peakIn = max(peakIn, d.BytesIn)
		peakOut = max(peakOut, d.BytesOut)
	}
	res.PeakUsed = 0
	for _, s := range res.Occupancy {
		res.PeakUsed = max(res.PeakUsed, s.Max)
	}
	res.HitRate = ratio(res.Hits, res.Requests)
	res.ByteHitRate = ratio(res.BytesHit, res.BytesOut)
	res.OutInRatio = ratio(res.BytesOut, res.BytesIn)
	res.WANSavedPerDay = float64(res.BytesOut-res.BytesIn) / res.Days
	res.MeanInGbps = Gbps(float64(res.BytesIn) / res.Days)
	res.MeanOutGbps = Gbps(float64(res.BytesOut) / res.Days)
	res.PeakInGbps = Gbps(float64(peakIn))
	res.PeakOutGbps = Gbps(float64(peakOut))
	res.NICGbps = NIC(max(res.PeakInGbps, res.PeakOutGbps))
}

// Merge combines replays of independent SHARDS samples of one trace into one
// estimate for the whole trace: each replay of a sample already estimates the
// full trace's counters, so Merge averages them and recomputes the rates.
// Daily counters are matched by day, occupancy samples by start time (the runs
// must share Config.Origin and SampleEvery).
func Merge(rs []*Result) *Result {
	if len(rs) == 1 {
		return rs[0]
	}
	k := float64(len(rs))
	avg := func(v int64) int64 { return int64(math.Round(float64(v) / k)) }
	out := *rs[0]
	out.Daily, out.Occupancy = nil, nil
	out.FilesCreated, out.FilesDeleted, out.BytesDeleted, out.Purges, out.FinalUsed = 0, 0, 0, 0, 0
	days := map[time.Time]*Day{}
	occ := map[time.Time]*Sample{}
	var dayKeys, occKeys []time.Time
	for _, r := range rs {
		out.FilesCreated += r.FilesCreated
		out.FilesDeleted += r.FilesDeleted
		out.BytesDeleted += r.BytesDeleted
		out.Purges += r.Purges
		out.FinalUsed += r.FinalUsed
		out.Days = max(out.Days, r.Days)
		out.Elapsed += r.Elapsed
		for _, d := range r.Daily {
			m, ok := days[d.Start]
			if !ok {
				m = &Day{Start: d.Start}
				days[d.Start] = m
				dayKeys = append(dayKeys, d.Start)
			}
			m.Requests += d.Requests
			m.Hits += d.Hits
			m.BytesOut += d.BytesOut
			m.BytesHit += d.BytesHit
			m.BytesIn += d.BytesIn
		}
		for _, o := range r.Occupancy {
			m, ok := occ[o.Start]
			if !ok {
				m = &Sample{Start: o.Start}
				occ[o.Start] = m
				occKeys = append(occKeys, o.Start)
			}
			m.Min += o.Min
			m.Max += o.Max
			m.Last += o.Last
		}
	}
	slices.SortFunc(dayKeys, time.Time.Compare)
	slices.SortFunc(occKeys, time.Time.Compare)
	for _, key := range dayKeys {
		d := *days[key]
		d.Requests, d.Hits, d.BytesOut, d.BytesHit, d.BytesIn = avg(d.Requests), avg(d.Hits), avg(d.BytesOut), avg(d.BytesHit), avg(d.BytesIn)
		out.Daily = append(out.Daily, d)
	}
	for _, key := range occKeys {
		o := *occ[key]
		o.Min, o.Max, o.Last = avg(o.Min), avg(o.Max), avg(o.Last)
		out.Occupancy = append(out.Occupancy, o)
	}
	out.FilesCreated, out.FilesDeleted, out.BytesDeleted = avg(out.FilesCreated), avg(out.FilesDeleted), avg(out.BytesDeleted)
	out.Purges = avg(out.Purges)
	out.FinalUsed = avg(out.FinalUsed)
	out.derive()
	return &out
}

// Gbps converts bytes per day into Gbit/s.
func Gbps(bytesPerDay float64) float64 { return bytesPerDay * 8 / 86400 / 1e9 }

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func floorDay(t int64) int64 {
	d := t / day * day
	if d > t {
		d -= day
	}
	return d
}
