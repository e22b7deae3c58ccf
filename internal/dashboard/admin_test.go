package dashboard

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/metrics"
)

func TestAdminHandler(t *testing.T) {
	reg, _ := metrics.New(&metrics.Config{})
	d, err := New(&Config{Metrics: reg, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := AdminHandler(reg, d)
	for _, c := range []struct {
		path string
		code int
	}{{"/metrics", 200}, {"/health", 200}, {"/dashboard", 200}, {"/api/stats", 200}, {"/", 302}, {"/nope", 404}} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", c.path, nil))
		if rec.Code != c.code {
			t.Errorf("GET %s: %d; want %d", c.path, rec.Code, c.code)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if loc := rec.Header().Get("Location"); loc != "/dashboard" {
		t.Errorf("/ redirects to %q", loc)
	}
}
