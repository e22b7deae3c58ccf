package httpfront

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// What the Pelican client (PelicanPlatform/pelican client/handle_http.go)
// sends with every GET and reads back, as XrdHttp answers it in a Pelican
// cache:
//
//   - X-Transfer-Status: true with TE: trailers asks for the
//     X-Transfer-Status trailer, "200: OK" after a complete body, "500:
//     <reason>" when the body failed after the headers went out: the
//     client then fails the transfer instead of trusting a short body.
//     Over HTTP/1.1 a trailer needs chunked encoding, so such a response
//     has no Content-Length (as XrdHttp's); HTTP/2 keeps it.
//   - X-Pelican-Timeout: how long the client waits for the response's
//     headers (a Go duration, "9.5s"); XCache hands it to its origin
//     client as pelican.timeout. hepcache gives up at that point too, with
//     504, so the client hears why instead of timing out: the fetch it
//     started goes on for the next reader.
//   - Server: recorded by the client as the server's version.

// transferStatus is the trailer's name.
const transferStatus = "X-Transfer-Status"

// wantsTransferStatus reports whether r asked for the X-Transfer-Status
// trailer.
func wantsTransferStatus(r *http.Request) bool {
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get(transferStatus)), "true") {
		return false
	}
	for _, v := range r.Header.Values("TE") {
		for t := range strings.SplitSeq(v, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(t), ";")
			if strings.EqualFold(strings.TrimSpace(name), "trailers") {
				return true
			}
		}
	}
	return false
}

// declareTransferStatus announces the trailer on a response about to
// send a body.
func declareTransferStatus(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Trailer", transferStatus)
	if r.ProtoMajor < 2 {
		h.Del("Content-Length") // chunked: the only HTTP/1.1 framing with trailers
	}
}

// setTransferStatus sets the trailer's value: "200: OK", or 500 and why.
func setTransferStatus(w http.ResponseWriter, err error) {
	if err == nil {
		w.Header().Set(transferStatus, "200: OK")
		return
	}
	msg := strings.Join(strings.Fields(err.Error()), " ") // one line
	w.Header().Set(transferStatus, "500: "+msg[:min(len(msg), 512)])
}

// errPelicanTimeout ends a request at its X-Pelican-Timeout.
var errPelicanTimeout = errors.New("X-Pelican-Timeout")

// pelicanTimeout returns the X-Pelican-Timeout of r, 0 without one.
func pelicanTimeout(r *http.Request) time.Duration {
	v := strings.TrimSpace(r.Header.Get("X-Pelican-Timeout"))
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		if n, nerr := strconv.Atoi(v); nerr == nil {
			d, err = time.Duration(n)*time.Second, nil // seconds, as some clients write it
		}
	}
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// untilFirstByte returns a context of r that ends after d unless
// started is called first (the response's first byte is on its way);
// d == 0: r's context. stop releases the timer.
func untilFirstByte(r *http.Request, d time.Duration) (ctx context.Context, started, stop func()) {
	if d <= 0 {
		return r.Context(), func() {}, func() {}
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	t := time.AfterFunc(d, func() { cancel(fmt.Errorf("%w of %v reached before the first byte", errPelicanTimeout, d)) })
	return ctx, func() { t.Stop() }, func() { t.Stop(); cancel(nil) }
}

// timedOut turns an error caused by the X-Pelican-Timeout of ctx into a
// 504 that says so.
func timedOut(ctx context.Context, err error) error {
	if err == nil || !errors.Is(context.Cause(ctx), errPelicanTimeout) {
		return err
	}
	return &httpError{code: http.StatusGatewayTimeout, msg: context.Cause(ctx).Error() + ": the cache is still fetching the file for the next request", err: context.DeadlineExceeded}
}
