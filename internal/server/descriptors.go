package server

import (
	"log/slog"
	"math"
	"net"

	"github.com/hepcache/hepcache/internal/acceptretry"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/connlimit"
	"github.com/hepcache/hepcache/internal/fdbudget"
	"github.com/hepcache/hepcache/internal/metrics"
)

// descriptors is the server's descriptor budget and what enforces it:
// the bounds on client connections (every front end together, and per
// client), the lingering files' bound (cache.Config.MaxLingering), and the
// listeners that back off instead of dying when accept meets EMFILE.
type descriptors struct {
	budget fdbudget.Budget
	// conns bounds the client connections of every front end.
	conns *connlimit.Limits
	// httpGate is the HTTP front end's door (root:// has its own).
	httpGate *connlimit.Gate
	// accepts count each listener's failed accepts, by name.
	accepts map[string]*acceptretry.Stats
}

// newDescriptors raises the soft RLIMIT_NOFILE to the hard limit, splits
// it, and says so in the log (with a warning when it is too small, or
// when limits.max_connections is set beyond its share).
func newDescriptors(cfg *config.Config, log *slog.Logger) *descriptors {
	soft, hard, err := fdbudget.Raise()
	if err != nil {
		log.Warn("descriptor limit not raised to the hard limit", "err", err)
	}
	d := &descriptors{budget: fdbudget.Split(int(min(soft, math.MaxInt32))), accepts: map[string]*acceptretry.Stats{}}
	args := []any{"limit", soft, "hard_limit", hard}
	for _, p := range d.budget.Parts() {
		args = append(args, p.Name, p.N)
	}
	log.Info("hepcache descriptors (RLIMIT_NOFILE) split", args...)
	if d.budget.Limit < fdbudget.MinUseful {
		log.Warn("the descriptor limit is too low to serve many clients: raise LimitNOFILE (ulimit -n)", "limit", soft, "at_least", fdbudget.MinUseful)
	}
	if m := cfg.Limits.MaxConnections; m > d.budget.Connections {
		log.Warn("limits.max_connections is over the descriptor budget's share for connections: clients may meet 'too many open files' instead of a busy answer",
			"max_connections", m, "share", d.budget.Connections, "limit", soft)
	}
	d.conns = connlimit.New(d.maxConns(cfg.Limits), d.budget.Waiting)
	d.setLimits(cfg.Limits)
	return d
}

// maxConns is limits.max_connections as connlimit takes it: the budget's
// share for 0, no bound (0) for -1.
func (d *descriptors) maxConns(l config.LimitsConfig) int {
	switch {
	case l.MaxConnections < 0:
		return 0
	case l.MaxConnections == 0:
		return d.budget.Connections
	}
	return l.MaxConnections
}

// setLimits applies [limits] to the connection bounds (start-up, reload).
func (d *descriptors) setLimits(l config.LimitsConfig) {
	d.conns.Set(d.maxConns(l), d.budget.Waiting)
	prefix := l.IPv6ClientPrefix
	if prefix == 0 {
		prefix = connlimit.DefaultIPv6Prefix
	}
	d.conns.SetIPv6Prefix(prefix)
	if d.httpGate != nil {
		d.httpGate.SetPerClient(perClientMax(l))
	}
}

// listener returns ln backing off from failed accepts (EMFILE above all)
// instead of failing, counted under name.
func (d *descriptors) listener(name string, ln net.Listener, log *slog.Logger) net.Listener {
	st := d.accepts[name]
	if st == nil {
		st = &acceptretry.Stats{}
		d.accepts[name] = st
	}
	return acceptretry.Wrap(ln, name, log, st)
}

// descriptorFigures reports the budget and its use to /metrics.
func (s *Server) descriptorFigures() metrics.DescriptorFigures {
	d := s.fds
	var f metrics.DescriptorFigures
	for _, p := range d.budget.Parts() {
		f.Budget = append(f.Budget, metrics.NamedValue{Name: p.Name, Value: int64(p.N)})
	}
	c := d.conns.Counts()
	f.Used = []metrics.NamedValue{{Name: "connections", Value: int64(c.Admitted)}, {Name: "waiting", Value: int64(c.Waiting)},
		{Name: "open_files", Value: s.cache.Stats().OpenFiles.Load()}, {Name: "lingering", Value: int64(s.cache.Lingering())}}
	for _, name := range []string{"root", "http", "metrics", "admin"} {
		if st := d.accepts[name]; st != nil {
			f.AcceptErrors = append(f.AcceptErrors, metrics.NamedValue{Name: name, Value: st.Errors.Load()})
		}
	}
	add := func(proto string, st *connlimit.Stats) {
		f.Busy = append(f.Busy, metrics.BusyCount{Protocol: proto, Bound: "total", N: st.WaitedTotal.Load()},
			metrics.BusyCount{Protocol: proto, Bound: "client", N: st.WaitedClient.Load()})
		f.Dropped = append(f.Dropped, metrics.NamedValue{Name: proto, Value: st.Dropped.Load()})
	}
	add("root", s.root.ConnStats())
	if d.httpGate != nil {
		add("http", &d.httpGate.Stats)
	}
	return f
}
