package metrics

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

// Health states.
const (
	Healthy  = "healthy"
	Degraded = "degraded"
	Down     = "down"
)

// HealthReport is the body of /health.
type HealthReport struct {
	// Status is healthy, degraded (serving, but an admin should look: disk
	// errors, a data disk out of service, recent origin errors, usage above
	// the high watermark) or down
	// (the cache directory is not writable).
	Status string `json:"status"`
	// Reasons explain a status other than healthy; never null.
	Reasons []string `json:"reasons"`
	// Notes say what is going on that is not wrong ("index loading n of
	// N" after a start); omitted when none.
	Notes []string `json:"notes,omitempty"`
}

// Health evaluates the cache's health now.
func (r *Registry) Health() HealthReport {
	rep := HealthReport{Status: Healthy, Reasons: []string{}}
	down := func(why string) { rep.Status = Down; rep.Reasons = append(rep.Reasons, why) }
	degraded := func(why string) {
		if rep.Status == Healthy {
			rep.Status = Degraded
		}
		rep.Reasons = append(rep.Reasons, why)
	}
	now := r.cfg.Now()
	if err := r.probe(); err != nil {
		down(fmt.Sprintf("cache directory not writable: %v", err))
	}
	if src := r.source(); src != nil {
		s := r.Snapshot()
		switch {
		case s.UsageErr != "":
			down("cannot measure cache space: " + s.UsageErr)
		case s.High > 0 && s.Used > s.High:
			degraded(fmt.Sprintf("usage %d bytes above the high watermark %d bytes (purge cannot keep up, or other data fills the file system)", s.Used, s.High))
		}
		f := src.CacheFigures()
		if x := f.Index; x.Loading {
			of := fmt.Sprintf("%d", x.Total)
			if x.Counting || x.Total < 0 {
				of = fmt.Sprintf("%d found so far", max(x.Total, 0))
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("index loading %d of %s (serving; purge waits for it)", x.Loaded, of))
		}
		n := f.WriteErrors + f.SyncErrors
		r.healthMu.Lock()
		if n != r.diskErrs {
			r.diskErrs, r.diskErrAt = n, now
		}
		at := r.diskErrAt
		r.healthMu.Unlock()
		if !at.IsZero() && now.Sub(at) < r.cfg.HealthWindow {
			degraded(fmt.Sprintf("disk errors: %d write or sync errors so far, the latest within %v", n, r.cfg.HealthWindow))
		}
	}
	for _, d := range r.diskStates() {
		switch {
		case !d.Up:
			degraded(fmt.Sprintf("data disk %s out of service: %s", d.Dir, d.Reason))
		case d.High > 0 && d.Used > d.High:
			degraded(fmt.Sprintf("data disk %s: usage %d bytes above its high watermark %d bytes (purge cannot keep up, or other data fills it)", d.Dir, d.Used, d.High))
		}
	}
	for _, s := range r.originList() {
		e := s.lastErr.Load()
		if e != nil && now.Sub(e.at) < r.cfg.HealthWindow {
			var total int64
			for op := range numOps {
				total += s.errors[op].Load()
			}
			degraded(fmt.Sprintf("origin %s: %d errors so far, the latest %s ago: %s", s.name, total, now.Sub(e.at).Round(1e9), e.msg))
		}
	}
	return rep
}

// probe checks that a file can be created in the cache directory, at most
// once per ProbeInterval.
func (r *Registry) probe() error {
	if r.cfg.CacheDir == "" {
		return nil
	}
	now := r.cfg.Now()
	r.healthMu.Lock()
	if !r.probeAt.IsZero() && now.Sub(r.probeAt) < r.cfg.ProbeInterval {
		err := r.probeErr
		r.healthMu.Unlock()
		return err
	}
	r.healthMu.Unlock()
	// The probe is disk I/O: not under the lock. Two concurrent probes are
	// harmless.
	p := filepath.Join(r.cfg.CacheDir, ".health-probe-"+strconv.Itoa(os.Getpid()))
	err := os.WriteFile(p, []byte("ok\n"), 0o600)
	if err == nil {
		err = os.Remove(p)
	}
	r.healthMu.Lock()
	r.probeAt, r.probeErr = now, err
	r.healthMu.Unlock()
	return err
}

// HealthHandler serves /health: the HealthReport as JSON, with status 200
// when healthy or degraded and 503 when down.
func (r *Registry) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rep := r.Health()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if rep.Status == Down {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		if req.Method == http.MethodHead {
			return
		}
		json.NewEncoder(w).Encode(rep)
	})
}
