// Package cachemetrics adapts the cache to the metrics registry: it reads
// the cache's counters and occupancy into metrics.CacheFigures, so that
// neither package imports the other.
package cachemetrics

import (
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/metrics"
	"github.com/hepcache/hepcache/internal/procstat"
	"os"
)

// Source returns c as a metrics.CacheSource.
func Source(c *cache.Cache) metrics.CacheSource { return source{c} }

type source struct{ c *cache.Cache }

func (s source) CacheFigures() metrics.CacheFigures {
	st := s.c.Stats()
	f := metrics.CacheFigures{
		Hits: st.Hits.Load(), PartialHits: st.PartialHits.Load(), Misses: st.Misses.Load(), OpenErrors: st.OpenErrors.Load(),
		LocalRedirects: st.LocalRedirects.Load(),
		BytesHit:       st.BytesHit.Load(), BytesMissed: st.BytesMissed.Load(), BytesBypassed: st.BytesBypassed.Load(),
		BytesFetched: st.BytesFetched.Load(), PrefetchBytes: st.PrefetchBytes.Load(),
		BlocksFetched: st.BlocksFetched.Load(), FetchErrors: st.FetchErrors.Load(), CoalescedWaits: st.CoalescedWaits.Load(),
		WriteErrors: st.WriteErrors.Load(), SyncErrors: st.SyncErrors.Load(),
		OpenFiles: st.OpenFiles.Load(), Evictions: st.Evictions.Load(), EvictedBytes: st.EvictedBytes.Load(), PurgeRuns: st.PurgeRuns.Load(),
		ChecksumFailures: st.ChecksumFailures.Load(), Revalidations: st.Revalidations.Load(),
		BlocksChecked: st.BlocksChecked.Load(), BlocksCorrupt: st.BlocksCorrupt.Load(), LinksRefused: st.LinksRefused.Load(), PinsRefused: st.PinsRefused.Load(),
		DisksFailed:    st.DisksFailed.Load(),
		LastPurgeFiles: st.LastPurgeFiles.Load(), LastPurgeNanos: st.LastPurgeNanos.Load(),
		FetchInFlight: s.c.FetchInFlight(), FetchWaiting: s.c.FetchWaiting(),
		OpensShed: st.OpensShed.Load(), DigestsComputed: st.DigestsComputed.Load(),
		KeptFiles: int64(s.c.Kept()),
	}
	u := s.c.RAM()
	// The arena's resident part and the process's RSS read back to back:
	// while blocks first take their slots the arena grows by a MiB a
	// millisecond, and an RSS read later in the scrape would count that
	// growth as memory outside the arena.
	resident := s.c.RAMResident()
	outside := int64(-1)
	if rss, err := procstat.RSS(os.Getpid()); err == nil && resident >= 0 {
		outside = rss - resident
	}
	f.RAM = metrics.RAMFigures{Size: u.Size, Cached: u.Cached, Filling: u.Filling,
		Pinned: u.Pinned, Touched: u.Touched, Resident: resident, Outside: outside,
		Limit: u.Limit, HandedBack: u.HandedBack,
		Hits: u.Hits, Misses: u.Misses, Evictions: u.Evictions,
		DiskReads: u.DiskReads, DiskReadBytes: u.DiskReadBytes,
		DirectWrites: st.DirectWrites.Load(), BufferedWrites: st.BufferedWrites.Load()}
	for _, w := range s.c.FetchWindows() {
		f.FetchWindows = append(f.FetchWindows, metrics.FetchWindow{
			Origin: w.Origin, Window: w.Window, InFlight: w.InFlight,
			RateBps: w.RateBps, MinRTT: max(0, w.MinRTT.Seconds()), Plateaued: w.Plateaued,
		})
	}
	us, err := s.c.Usage()
	if err != nil {
		f.UsageErr = err.Error()
	}
	f.Used, f.Total, f.High, f.Low = us.Used, us.Total, us.High, us.Low
	f.Files, f.Bytes = int64(us.Files), us.Bytes
	x := s.c.IndexState()
	f.Index = metrics.IndexFigures{Loading: x.Loading, Counting: x.Loading && !x.FromSnapshot, Loaded: x.Loaded, Total: x.Total,
		Files: int64(x.Files), Bytes: x.Bytes}
	return f
}
