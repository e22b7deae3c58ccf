package server

import (
	"net/http"
	"net/http/pprof"
)

// withPprof serves Go's profiles under /debug/pprof/ next to h (the metrics
// listener, server.debug_pprof): a goroutine dump of a node that looks
// stuck without SIGQUIT, which would kill it.
func withPprof(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also goroutine, heap, allocs...
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
