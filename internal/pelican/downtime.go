package pelican

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// # Downtimes
//
// A cache in downtime tells the director so in every ad (the ad's
// downtimes, server_structs.Downtime); the director takes a server whose
// downtime is in force out of its redirects and marks it filtered in its
// server list (director/cache_ads.go applyServerDowntimes), and puts it
// back at the first ad without one. hepcache keeps its downtimes in the
// membership's state directory (downtimes.json), where `hepcache pelican
// downtime` writes them; the membership reads the file before every ad,
// notices a change within downtimeCheck, and advertises at once on a
// change and at each downtime's start and end, so the director hears of
// it in seconds, not at the next minute's ad.

// downtimeCheck is how often the membership looks at the downtime file.
const downtimeCheck = 2 * time.Second

// Downtime classes and severities, as Pelican names them.
const (
	ClassScheduled   = "SCHEDULED"
	ClassUnscheduled = "UNSCHEDULED"
	SeverityOutage   = "Outage (completely inaccessible)"
)

// severities are Pelican's (server_structs.Severity).
var severities = []string{SeverityOutage, "Severe (most services down)",
	"Intermittent Outage (may be up for some of the time)", "No Significant Outage Expected (you shouldn't notice)"}

// Downtime is a period in which the cache is out of service.
type Downtime struct {
	// ID names it (a UUID, as Pelican's).
	ID          string `json:"id"`
	Class       string `json:"class"`
	Severity    string `json:"severity"`
	Description string `json:"description"`
	// Start and End bound it; a zero End: until removed.
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Created time.Time `json:"created"`
	// By is who set it (the user running the command).
	By string `json:"by"`
}

// Active reports whether d is in force at now.
func (d Downtime) Active(now time.Time) bool {
	return !now.Before(d.Start) && (d.End.IsZero() || now.Before(d.End))
}

// Validate checks d as the director would take it.
func (d Downtime) Validate() error {
	var errs []error
	if d.Class != ClassScheduled && d.Class != ClassUnscheduled {
		errs = append(errs, fmt.Errorf("class %q: %s or %s", d.Class, ClassScheduled, ClassUnscheduled))
	}
	if !slices.Contains(severities, d.Severity) {
		errs = append(errs, fmt.Errorf("severity %q: one of %q", d.Severity, severities))
	}
	if d.Start.IsZero() {
		errs = append(errs, errors.New("no start"))
	}
	if !d.End.IsZero() && !d.End.After(d.Start) {
		errs = append(errs, fmt.Errorf("end %s is not after start %s", d.End.Format(time.RFC3339), d.Start.Format(time.RFC3339)))
	}
	return errors.Join(errs...)
}

// downtimeFile is where a state directory keeps the downtimes.
func downtimeFile(stateDir string) string { return filepath.Join(stateDir, "downtimes.json") }

// Downtimes returns the downtimes kept in stateDir, none if there is no
// file.
func Downtimes(stateDir string) ([]Downtime, error) {
	b, err := os.ReadFile(downtimeFile(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pelican downtimes: %w", err)
	}
	var ds []Downtime
	if err := json.Unmarshal(b, &ds); err != nil {
		return nil, fmt.Errorf("pelican downtimes %s: %w", downtimeFile(stateDir), err)
	}
	return ds, nil
}

// AddDowntime keeps d (given an ID and creation time if it has none) in
// stateDir, dropping downtimes that have ended; it returns d as kept.
func AddDowntime(stateDir string, d Downtime, now time.Time) (Downtime, error) {
	if d.ID == "" {
		d.ID = uuid()
	}
	if d.Created.IsZero() {
		d.Created = now
	}
	if err := d.Validate(); err != nil {
		return d, fmt.Errorf("downtime: %w", err)
	}
	ds, err := Downtimes(stateDir)
	if err != nil {
		return d, err
	}
	ds = slices.DeleteFunc(ds, func(o Downtime) bool { return !o.End.IsZero() && !now.Before(o.End) })
	return d, saveDowntimes(stateDir, append(ds, d))
}

// RemoveDowntime removes the downtimes whose ID starts with id (all with
// "all"); it returns how many.
func RemoveDowntime(stateDir, id string) (int, error) {
	ds, err := Downtimes(stateDir)
	if err != nil {
		return 0, err
	}
	n := len(ds)
	ds = slices.DeleteFunc(ds, func(d Downtime) bool { return id == "all" || id != "" && strings.HasPrefix(d.ID, id) })
	if n == len(ds) {
		return 0, nil
	}
	return n - len(ds), saveDowntimes(stateDir, ds)
}

func saveDowntimes(stateDir string, ds []Downtime) error {
	if ds == nil {
		ds = []Downtime{}
	}
	b, err := json.MarshalIndent(ds, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("pelican downtimes: %w", err)
	}
	if err := writeFileAtomic(downtimeFile(stateDir), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("pelican downtimes: %w", err)
	}
	return nil
}

// uuid is a random UUID (version 4) in its usual form.
func uuid() string {
	h := newInstanceID()
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// downtimeAd is a downtime as the ad carries it (server_structs.Downtime:
// times in Unix milliseconds, -1 for an open end).
type downtimeAd struct {
	UUID        string `json:"id"`
	ServerName  string `json:"serverName"`
	ServerID    string `json:"serverId"`
	CreatedBy   string `json:"createdBy"`
	UpdatedBy   string `json:"updatedBy"`
	Source      string `json:"source"`
	Class       string `json:"class"`
	Description string `json:"description"`
	Severity    string `json:"severity"`
	StartTime   int64  `json:"startTime"`
	EndTime     int64  `json:"endTime"`
	CreatedAt   int64  `json:"createdAt"`
	UpdatedAt   int64  `json:"updatedAt"`
	DeletedAt   *int64 `json:"deletedAt"`
}

// adDowntimes are the downtimes in force or to come at now, as the ad
// carries them (a Pelican cache sends its incomplete ones,
// database.GetIncompleteDowntimes); the error says why the file could
// not be read (the ad then carries none).
func (m *Member) adDowntimes(now time.Time) ([]json.RawMessage, error) {
	ds, err := Downtimes(m.cfg.StateDir)
	out := []json.RawMessage{}
	for _, d := range ds {
		if !d.End.IsZero() && !now.Before(d.End) {
			continue
		}
		end := int64(-1)
		if !d.End.IsZero() {
			end = d.End.UnixMilli()
		}
		by := d.By
		if by == "" {
			by = "hepcache"
		}
		b, _ := json.Marshal(downtimeAd{UUID: d.ID, ServerID: m.serverID, CreatedBy: by, UpdatedBy: by, Source: "cache",
			Class: d.Class, Description: d.Description, Severity: d.Severity, StartTime: d.Start.UnixMilli(), EndTime: end,
			CreatedAt: d.Created.UnixMilli(), UpdatedAt: d.Created.UnixMilli()})
		out = append(out, b)
	}
	return out, err
}

// nextDowntimeEdge is how long until a downtime starts or ends (the
// director must hear of it then), false when none will.
func (m *Member) nextDowntimeEdge(now time.Time) (time.Duration, bool) {
	ds, _ := Downtimes(m.cfg.StateDir)
	var next time.Duration
	found := false
	for _, d := range ds {
		for _, t := range []time.Time{d.Start, d.End} {
			if t.After(now) && (!found || t.Sub(now) < next) {
				next, found = t.Sub(now), true
			}
		}
	}
	return next, found
}

// watchDowntimes wakes the membership loop when the downtime file
// changes, until shutdown.
func (m *Member) watchDowntimes() {
	stamp := func() string {
		fi, err := os.Stat(downtimeFile(m.cfg.StateDir))
		if err != nil {
			return ""
		}
		return fmt.Sprint(fi.ModTime().UnixNano(), fi.Size())
	}
	last := stamp()
	t := time.NewTicker(downtimeCheck)
	defer t.Stop()
	for {
		select {
		case <-m.shutdown:
			return
		case <-t.C:
		}
		if s := stamp(); s != last {
			last = s
			m.log.Info("pelican: the downtimes changed; advertising now")
			select {
			case m.wake <- struct{}{}:
			default:
			}
		}
	}
}
