package metrics

// PrestageFigures are the prestager's counters and its most recent jobs.
type PrestageFigures struct {
	Queued  int64         `json:"queued"`
	Running int64         `json:"running"`
	Done    int64         `json:"done"`
	Failed  int64         `json:"failed"`
	Bytes   int64         `json:"bytes"`
	Jobs    []PrestageJob `json:"jobs"`
}

// PrestageJob is one job's progress in files and bytes.
type PrestageJob struct {
	ID        string `json:"id"`
	Submitted string `json:"submitted"`
	Files     int    `json:"files"`
	Done      int    `json:"done"`
	Failed    int    `json:"failed"`
	Cancelled int    `json:"cancelled"`
	Bytes     int64  `json:"bytes"`
	Size      int64  `json:"size"`
}

// SetPrestage sets the function that reports the prestager at each scrape
// (nil: none).
func (r *Registry) SetPrestage(fn func() PrestageFigures) { r.prestage.Store(&fn) }

// Prestage returns the prestager's figures; false when none are set.
func (r *Registry) Prestage() (PrestageFigures, bool) {
	p := r.prestage.Load()
	if p == nil || *p == nil {
		return PrestageFigures{}, false
	}
	return (*p)(), true
}

func (r *Registry) writePrestage(e *expWriter) {
	f, ok := r.Prestage()
	if !ok {
		return
	}
	e.gauge("hepcache_prestage_queued_files", "Files waiting to be prestaged.", f.Queued)
	e.gauge("hepcache_prestage_running_files", "Files being prestaged now.", f.Running)
	e.counter("hepcache_prestage_done_files_total", "Files prestaged (kXR_prepare, hepcache prestage, the HTTP form).", f.Done)
	e.counter("hepcache_prestage_failed_files_total", "Files whose prestage failed.", f.Failed)
	e.counter("hepcache_prestage_bytes_total", "Bytes read through the cache by prestaging.", f.Bytes)
}
