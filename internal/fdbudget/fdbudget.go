// Package fdbudget splits the process's descriptor limit (RLIMIT_NOFILE)
// between what holds descriptors: client connections, files open for
// clients, files lingering after their last close, origin handles and a
// spare for the rest. Each part gets a bound below the limit, so that the
// server answers "busy" before it meets EMFILE, as nginx's
// worker_connections and HAProxy's maxconn bound connections below the
// process's descriptors.
package fdbudget

import (
	"fmt"
	"syscall"
)

// Raise raises the soft RLIMIT_NOFILE to the hard limit and returns the
// limits then in force. Go's runtime does nearly so at start-up (since
// Go 1.19, syscall's init: to one below the hard limit, by which it tells
// whether another process changed it; the children it starts got the
// original soft limit back): this takes the last one too, makes the
// budget independent of the runtime, and reads it. Children started
// afterwards inherit the raised limit.
func Raise() (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	if rl.Cur < rl.Max {
		want := rl
		want.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return rl.Cur, rl.Max, fmt.Errorf("raise RLIMIT_NOFILE from %d to %d: %w", rl.Cur, rl.Max, err)
		}
		rl = want
	}
	return rl.Cur, rl.Max, nil
}

// Budget is the split of Limit descriptors. Every part is at least 1.
type Budget struct {
	// Limit is every descriptor the process may hold (the soft limit).
	Limit int `json:"limit"`
	// Connections bounds the client connections served at once, every
	// front end together (limits.max_connections); Waiting bounds those
	// over a bound that are told to come back (kXR_wait, 503).
	Connections int `json:"connections"`
	Waiting     int `json:"waiting"`
	// OpenFiles is set aside for the files clients hold open: a data file
	// each (and a file:// origin's file while it is fetched).
	OpenFiles int `json:"open_files"`
	// Lingering bounds the files kept open after their last close
	// (cache.Config.MaxLingering).
	Lingering int `json:"lingering"`
	// Origin is set aside for origin connections and handles (root://
	// and HTTP connections, a file:// origin's open files).
	Origin int `json:"origin"`
	// Spare is the rest: listeners, logs, sidecars being read or
	// written, syncs, DNS, the cluster's gossip, metrics scrapes.
	Spare int `json:"spare"`
}

// Shares of what the spare leaves, in percent, and bounds of the parts.
const (
	connShare      = 35
	openShare      = 25
	lingerShare    = 20
	originShare    = 20
	minSpare       = 64
	maxSpare       = 2048
	minWaiting     = 64
	maxWaiting     = 1024
	waitingDivisor = 8 // the waiting room takes an eighth of the connections' share
	// maxLingering bounds the lingering files whatever the limit: beyond
	// it the memory of their state, not their descriptors, is what counts
	// (a file lingers 5 s: 16384 is over 3,000 closes a second).
	maxLingering = 16384
)

// Split divides limit descriptors: a spare of a tenth (64 to 2048), then
// 35 % for connections (an eighth of it, 64 to 1024, for the waiting
// room), 25 % for open files, 20 % for lingering files (at most 16384, the
// rest to the spare) and 20 % for origins. Below 256 descriptors the parts
// are too small to serve: Split gives them anyway, each at least 1, and
// the caller warns.
func Split(limit int) Budget {
	b := Budget{Limit: limit}
	b.Spare = min(max(limit/10, minSpare), maxSpare)
	rest := max(limit-b.Spare, 0)
	conns := rest * connShare / 100
	b.Waiting = min(max(conns/waitingDivisor, minWaiting), maxWaiting, max(conns/2, 1))
	b.Connections = max(conns-b.Waiting, 1)
	b.OpenFiles = max(rest*openShare/100, 1)
	b.Lingering = max(min(rest*lingerShare/100, maxLingering), 1)
	b.Origin = max(rest*originShare/100, 1)
	b.Spare = max(limit-b.Connections-b.Waiting-b.OpenFiles-b.Lingering-b.Origin, 1)
	return b
}

// MinUseful is the smallest limit whose split serves more than a handful
// of clients.
const MinUseful = 256

// Parts lists the parts by name, in a fixed order, for logs and metrics.
func (b Budget) Parts() []Part {
	return []Part{{"connections", b.Connections}, {"waiting", b.Waiting}, {"open_files", b.OpenFiles},
		{"lingering", b.Lingering}, {"origin", b.Origin}, {"spare", b.Spare}}
}

// Part is one named share of a Budget.
type Part struct {
	Name string
	N    int
}
