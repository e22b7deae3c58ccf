package xrootd

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// expiringAuthorizer authorizes opens until a time already past (as a
// credential that expired after its file was opened) and answers the reads
// asked about afterwards as readAnswer says.
type expiringAuthorizer struct {
	asked      atomic.Int32 // OpRead questions
	readAnswer func(req *backend.Request) error
}

func (a *expiringAuthorizer) Authorize(ctx context.Context, op Op, req backend.Request) error {
	return a.AuthorizeRequest(ctx, op, &req)
}

func (a *expiringAuthorizer) AuthorizeRequest(ctx context.Context, op Op, req *backend.Request) error {
	if op != OpRead {
		req.AuthUntil = time.Now().Add(-time.Second)
		return nil
	}
	a.asked.Add(1)
	return a.readAnswer(req)
}

// TestReadsOfAnExpiredOpen (issue 27, item 5): kXR_read, kXR_pgread and
// kXR_readv of a file whose open was authorized by a credential that has
// expired since are answered kXR_NotAuthorized with the authorizer's
// reason before any byte; a read the authorizer still allows
// goes on, and then costs no further question. Before, a handle kept the
// rights of its open for as long as it stayed open.
func TestReadsOfAnExpiredOpen(t *testing.T) {
	az := &expiringAuthorizer{}
	allow := atomic.Bool{}
	az.readAnswer = func(req *backend.Request) error {
		if allow.Load() {
			return nil // allowed, for good (no AuthUntil)
		}
		return fmt.Errorf("the token of alice expired at 2025-01-01T00:00:00Z during the session: %w", backend.ErrForbidden)
	}
	ts := startServer(t, "", func(c *Config, r *recorder) { c.Authorizer = az })
	writeRandom(t, ts.dir, "f", 100<<10)
	rc := dialRaw(t, ts.addr, true)
	fh := rc.open("/f")
	denied := func(what string, req []byte) {
		t.Helper()
		h, body := rc.call(req)
		msg := expectError(t, h, body, proto.ErrNotAuthorized)
		if !strings.Contains(msg, "expired") || !strings.Contains(msg, "/f") {
			t.Fatalf("%s after expiry: %q, want the reason", what, msg)
		}
	}
	denied("kXR_read", (&proto.ReadRequest{FHandle: fh, Length: 4096}).Append(nil, rc.next()))
	denied("kXR_pgread", (&proto.PgReadRequest{FHandle: fh, Length: 4096}).Append(nil, rc.next()))
	denied("kXR_readv", (&proto.ReadVRequest{Segs: []proto.ReadSeg{{FHandle: fh, Length: 100, Offset: 10}}}).Append(nil, rc.next()))
	if n := az.asked.Load(); n != 3 {
		t.Fatalf("the authorizer was asked about %d reads, want 3", n)
	}

	allow.Store(true)
	h, body := rc.call((&proto.ReadRequest{FHandle: fh, Length: 4096}).Append(nil, rc.next()))
	if h.Status != proto.StatusOK || len(body) != 4096 {
		t.Fatalf("read the authorizer allows: %v, %d bytes", h.Status, len(body))
	}
	rc.call((&proto.ReadRequest{FHandle: fh, Offset: 4096, Length: 4096}).Append(nil, rc.next()))
	if n := az.asked.Load(); n != 4 {
		t.Fatalf("the authorizer was asked about %d reads, want 4 (an allowed read without an end asks no more)", n)
	}

	// An open that allowed downloads, re-asked past its end, where the
	// authorizer now allows reading cached data only: refused (the file
	// was opened able to download).
	az.readAnswer = func(req *backend.Request) error { req.NoFetch = true; return nil }
	fh2 := rc.open("/f")
	h, body = rc.call((&proto.ReadRequest{FHandle: fh2, Length: 10}).Append(nil, rc.next()))
	if msg := expectError(t, h, body, proto.ErrNotAuthorized); !strings.Contains(msg, "open it again") {
		t.Fatalf("read of an open that could download, now allowed cached data only: %q", msg)
	}
}
