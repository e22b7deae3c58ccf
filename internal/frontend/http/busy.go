package httpfront

import (
	"encoding/json"

	"github.com/hepcache/hepcache/internal/connlimit"
	"net/http"
	"strconv"
)

// writeBusy answers a request the server will not take now: code 503
// (busy here: come back) or 429 (overloaded: a client with other servers
// to try, such as the Pelican client with the caches the director listed,
// goes to the next), with Retry-After in seconds (at least 1). The body
// of a 429 is what Pelican's own cache sends when it sheds a request
// ({"error":"cache_overloaded","detail":...}: its client reads the
// reason there), of a 503 the reason as text. Every busy answer (a
// request shed by the cache, a wait, a connection over a bound) goes out
// through here.
func writeBusy(w http.ResponseWriter, r *http.Request, code, retryAfter int, reason string) {
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(max(retryAfter, 1)))
	h.Set("X-Content-Type-Options", "nosniff")
	if code == http.StatusTooManyRequests {
		b, _ := json.Marshal(map[string]string{"error": "cache_overloaded", "detail": reason})
		h.Set("Content-Type", "application/json")
		w.WriteHeader(code)
		if r.Method != http.MethodHead {
			w.Write(append(b, '\n'))
		}
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		w.Write([]byte(strconv.Itoa(code) + " " + http.StatusText(code) + ": " + reason + "\n"))
	}
}

// overBound answers, and reports true for, a file request on a connection
// over a bound (connlimit) that finds no place free yet: 503 with
// Retry-After, and the connection closed after it, so that the client
// comes back on a new one rather than holding a place in the waiting room.
func overBound(w http.ResponseWriter, r *http.Request) bool {
	p, _ := r.Context().Value(passKey{}).(*connlimit.Pass)
	if p == nil || p.Admit() {
		return false
	}
	w.Header().Set("Connection", "close")
	writeBusy(w, r, http.StatusServiceUnavailable, connlimit.RetryAfter, p.Reason())
	return true
}
