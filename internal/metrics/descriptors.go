package metrics

// DescriptorFigures are the descriptor budget (fdbudget) and what uses it:
// the connection bounds' counts, the accept errors the listeners backed
// off from, the connections told busy.
type DescriptorFigures struct {
	// Budget is each part of the budget by name (connections, waiting,
	// open_files, lingering, origin, spare), Used what the bounded parts
	// hold now (connections, waiting, open_files, lingering).
	Budget, Used []NamedValue
	// AcceptErrors counts failed accepts by listener (root, http,
	// metrics, admin).
	AcceptErrors []NamedValue
	// Busy counts connections told to come back, by protocol and the bound
	// they were over (total, client); Dropped those closed at once for want
	// of a place to wait, by protocol.
	Busy    []BusyCount
	Dropped []NamedValue
}

// NamedValue is one labelled figure.
type NamedValue struct {
	Name  string
	Value int64
}

// BusyCount is the connections of one protocol told busy over one bound.
type BusyCount struct {
	Protocol, Bound string
	N               int64
}

// SetDescriptors sets the function that reports the descriptor figures
// at each scrape (nil: none).
func (r *Registry) SetDescriptors(fn func() DescriptorFigures) { r.descriptors.Store(&fn) }

func (r *Registry) writeDescriptors(e *expWriter) {
	p := r.descriptors.Load()
	if p == nil || *p == nil {
		return
	}
	f := (*p)()
	e.family("hepcache_descriptor_budget", "gauge", "The descriptor budget (RLIMIT_NOFILE) by part: client connections, connections waiting over a bound, files open for clients, lingering files, origins, spare.")
	for _, v := range f.Budget {
		e.sample("hepcache_descriptor_budget", `part="`+escape(v.Name)+`"`, v.Value)
	}
	e.family("hepcache_descriptors_used", "gauge", "Descriptors held now by the bounded parts of the budget.")
	for _, v := range f.Used {
		e.sample("hepcache_descriptors_used", `part="`+escape(v.Name)+`"`, v.Value)
	}
	e.family("hepcache_accept_errors_total", "counter", "Failed accepts (out of descriptors above all) after which a listener backed off and accepted again.")
	for _, v := range f.AcceptErrors {
		e.sample("hepcache_accept_errors_total", `listener="`+escape(v.Name)+`"`, v.Value)
	}
	e.family("hepcache_connections_busy_total", "counter", "Client connections over a bound (total or per client) told to come back: root:// kXR_wait, HTTP 503 with Retry-After.")
	for _, b := range f.Busy {
		e.sample("hepcache_connections_busy_total", `protocol="`+escape(b.Protocol)+`",bound="`+escape(b.Bound)+`"`, b.N)
	}
	e.family("hepcache_connections_dropped_total", "counter", "Client connections over a bound closed at once: the waiting room was full, or their client's share of it taken.")
	for _, v := range f.Dropped {
		e.sample("hepcache_connections_dropped_total", `protocol="`+escape(v.Name)+`"`, v.Value)
	}
}
