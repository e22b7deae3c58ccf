package dashboard

import (
	"net/http"

	"github.com/hepcache/hepcache/internal/metrics"
)

// AdminRoutes returns every admin endpoint by path: /metrics and /health
// from reg, /dashboard and /api/stats from d (nil d: no dashboard). Mount
// them on the HTTP front end (httpfront.Config.Routes) or use AdminHandler
// for a separate metrics listener.
func AdminRoutes(reg *metrics.Registry, d *Dashboard) map[string]http.Handler {
	routes := map[string]http.Handler{"/metrics": reg.Handler(), "/health": reg.HealthHandler()}
	if d != nil {
		for p, h := range d.Routes() {
			routes[p] = h
		}
	}
	return routes
}

// AdminHandler serves AdminRoutes on a listener of its own
// (server.metrics_listen); "/" leads to the dashboard, other paths are 404.
func AdminHandler(reg *metrics.Registry, d *Dashboard) http.Handler {
	mux := http.NewServeMux()
	for p, h := range AdminRoutes(reg, d) {
		mux.Handle(p, h)
	}
	if d != nil {
		mux.Handle("/{$}", http.RedirectHandler("/dashboard", http.StatusFound))
	}
	return mux
}
