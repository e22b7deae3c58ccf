package metrics

// SpaceFigures are the per-quota and per-directory figures of a cache
// (quotas, pins and directory statistics), exported with labels.
type SpaceFigures struct {
	PinnedBytes int64         `json:"pinned_bytes"`
	Quotas      []QuotaFigure `json:"quotas"`
	Dirs        []DirFigure   `json:"dirs"`
	Disks       []DiskFigure  `json:"disks"`
}

// DiskFigure is one data disk's state.
type DiskFigure struct {
	Dir    string `json:"dir"`
	Up     bool   `json:"up"`
	Reason string `json:"reason,omitempty"`
	Total  int64  `json:"total_bytes"`
	Used   int64  `json:"used_bytes"`
	High   int64  `json:"high_bytes"`
	Low    int64  `json:"low_bytes"`
	Files  int64  `json:"files"`
	Bytes  int64  `json:"bytes"`
	Errors int64  `json:"errors"`
	// DirectIO: the disk's data files bypass the page cache (O_DIRECT).
	DirectIO bool `json:"direct_io"`
}

// QuotaFigure is one quota's state.
type QuotaFigure struct {
	Prefix       string `json:"prefix"`
	Limit        int64  `json:"limit_bytes"`
	High         int64  `json:"high_bytes"`
	Low          int64  `json:"low_bytes"`
	Bytes        int64  `json:"bytes"`
	Files        int64  `json:"files"`
	EvictedFiles int64  `json:"evicted_files"`
	EvictedBytes int64  `json:"evicted_bytes"`
}

// DirFigure is one directory's statistics.
type DirFigure struct {
	Dir           string `json:"dir"`
	Files         int64  `json:"files"`
	Bytes         int64  `json:"bytes"`
	Hits          int64  `json:"hits"`
	Partial       int64  `json:"partial"`
	Misses        int64  `json:"misses"`
	BytesHit      int64  `json:"bytes_hit"`
	BytesMissed   int64  `json:"bytes_missed"`
	BytesBypassed int64  `json:"bytes_bypassed"`
}

// SetSpace sets the function that reports the space figures at each scrape
// (nil: none).
func (r *Registry) SetSpace(fn func() SpaceFigures) { r.space.Store(&fn) }

// SetDisks sets the function that reports the data disks to /health (nil:
// none): a disk out of service makes the node degraded.
func (r *Registry) SetDisks(fn func() []DiskFigure) { r.disks.Store(&fn) }

// diskStates returns the data disks, none when SetDisks was not called.
func (r *Registry) diskStates() []DiskFigure {
	p := r.disks.Load()
	if p == nil || *p == nil {
		return nil
	}
	return (*p)()
}

// Space returns the current space figures; false when none are set.
func (r *Registry) Space() (SpaceFigures, bool) {
	p := r.space.Load()
	if p == nil || *p == nil {
		return SpaceFigures{}, false
	}
	return (*p)(), true
}

func (r *Registry) writeSpace(e *expWriter) {
	f, ok := r.Space()
	if !ok {
		return
	}
	e.gauge("hepcache_pinned_bytes", "Bytes of pinned files, which purge never evicts.", f.PinnedBytes)
	writeDisks(e, f.Disks)
	if len(f.Quotas) > 0 {
		gauges := []struct {
			name, help string
			v          func(QuotaFigure) int64
		}{
			{"hepcache_quota_limit_bytes", "Space a quota's files may hold.", func(q QuotaFigure) int64 { return q.Limit }},
			{"hepcache_quota_high_watermark_bytes", "Usage of a quota above which its files are evicted.", func(q QuotaFigure) int64 { return q.High }},
			{"hepcache_quota_low_watermark_bytes", "Usage of a quota down to which its files are evicted.", func(q QuotaFigure) int64 { return q.Low }},
			{"hepcache_quota_used_bytes", "Bytes cached under a quota.", func(q QuotaFigure) int64 { return q.Bytes }},
			{"hepcache_quota_files", "Files cached under a quota.", func(q QuotaFigure) int64 { return q.Files }},
		}
		for _, g := range gauges {
			e.family(g.name, "gauge", g.help)
			for _, q := range f.Quotas {
				e.sample(g.name, `quota="`+escape(q.Prefix)+`"`, g.v(q))
			}
		}
		e.family("hepcache_quota_evicted_files_total", "counter", "Files evicted from under a quota.")
		for _, q := range f.Quotas {
			e.sample("hepcache_quota_evicted_files_total", `quota="`+escape(q.Prefix)+`"`, q.EvictedFiles)
		}
		e.family("hepcache_quota_evicted_bytes_total", "counter", "Bytes evicted from under a quota.")
		for _, q := range f.Quotas {
			e.sample("hepcache_quota_evicted_bytes_total", `quota="`+escape(q.Prefix)+`"`, q.EvictedBytes)
		}
	}
	if len(f.Dirs) == 0 {
		return
	}
	dir := func(d DirFigure) string { return `dir="` + escape(d.Dir) + `"` }
	e.family("hepcache_dir_cached_bytes", "gauge", "Bytes cached under a directory (space.dir_stats_depth).")
	for _, d := range f.Dirs {
		e.sample("hepcache_dir_cached_bytes", dir(d), d.Bytes)
	}
	e.family("hepcache_dir_files", "gauge", "Files cached under a directory.")
	for _, d := range f.Dirs {
		e.sample("hepcache_dir_files", dir(d), d.Files)
	}
	e.family("hepcache_dir_opens_total", "counter", "Closed accesses of files under a directory, by what the cache held at open.")
	for _, d := range f.Dirs {
		for _, v := range []struct {
			result string
			n      int64
		}{{"hit", d.Hits}, {"partial", d.Partial}, {"miss", d.Misses}} {
			e.sample("hepcache_dir_opens_total", dir(d)+`,result="`+v.result+`"`, v.n)
		}
	}
	e.family("hepcache_dir_served_bytes_total", "counter", "Bytes served from files under a directory, by source.")
	for _, d := range f.Dirs {
		for _, v := range []struct {
			source string
			n      int64
		}{{"hit", d.BytesHit}, {"miss", d.BytesMissed}, {"bypass", d.BytesBypassed}} {
			e.sample("hepcache_dir_served_bytes_total", dir(d)+`,source="`+v.source+`"`, v.n)
		}
	}
}

func writeDisks(e *expWriter, disks []DiskFigure) {
	if len(disks) == 0 {
		return
	}
	gauges := []struct {
		name, help string
		v          func(DiskFigure) int64
	}{
		{"hepcache_disk_up", "1 while a data disk is in service, 0 once it was taken out (I/O errors, read-only, unmounted).", func(d DiskFigure) int64 {
			if d.Up {
				return 1
			}
			return 0
		}},
		{"hepcache_disk_direct_io", "1 while a data disk's files are written and read with direct I/O (O_DIRECT), 0 where its file system refused it (buffered, through the page cache) or cache.direct_io is false.", func(d DiskFigure) int64 {
			if d.DirectIO {
				return 1
			}
			return 0
		}},
		{"hepcache_disk_capacity_bytes", "Size of a data disk's file system.", func(d DiskFigure) int64 { return d.Total }},
		{"hepcache_disk_used_bytes", "Used bytes of a data disk's file system.", func(d DiskFigure) int64 { return d.Used }},
		{"hepcache_disk_high_watermark_bytes", "Usage of a data disk above which its files are evicted (watermarks as sizes: the disk's share of them, in proportion to its size).", func(d DiskFigure) int64 { return d.High }},
		{"hepcache_disk_low_watermark_bytes", "Usage of a data disk down to which its files are evicted (watermarks as sizes: the disk's share of them, in proportion to its size).", func(d DiskFigure) int64 { return d.Low }},
		{"hepcache_disk_files", "Cached files on a data disk.", func(d DiskFigure) int64 { return d.Files }},
		{"hepcache_disk_cached_bytes", "Cached bytes on a data disk.", func(d DiskFigure) int64 { return d.Bytes }},
	}
	for _, g := range gauges {
		e.family(g.name, "gauge", g.help)
		for _, d := range disks {
			e.sample(g.name, `disk="`+escape(d.Dir)+`"`, g.v(d))
		}
	}
	e.family("hepcache_disk_errors_total", "counter", "I/O errors on a data disk's files.")
	for _, d := range disks {
		e.sample("hepcache_disk_errors_total", `disk="`+escape(d.Dir)+`"`, d.Errors)
	}
}
