package xrootd

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

func TestErrorCode(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("open root://site//f: %w", err) }
	tests := []struct {
		name string
		err  error
		code proto.ErrorCode
	}{
		{"not found", wrap(origin.ErrNotFound), proto.ErrNotFound},
		{"forbidden", wrap(backend.ErrForbidden), proto.ErrNotAuthorized},
		{"origin refused us", wrap(origin.ErrNotAuthorized), proto.ErrNotAuthorized},
		{"directory", wrap(origin.ErrIsDir), proto.ErrIsDirectory},
		{"origin down", wrap(origin.ErrUnavailable), proto.ErrServerError},
		{"busy", wrap(backend.ErrBusy), proto.ErrOverloaded},
		{"invalid path", wrap(backend.ErrInvalidPath), proto.ErrArgInvalid},
		{"invalid at origin", wrap(origin.ErrInvalid), proto.ErrArgInvalid},
		{"unsupported", wrap(origin.ErrUnsupported), proto.ErrUnsupported},
		{"timeout", wrap(context.DeadlineExceeded), proto.ErrReqTimedOut},
		{"errno", wrap(syscall.EIO), proto.ErrIOError},
		{"protocol error from an origin", wrap(&proto.Error{Code: proto.ErrNoSpace}), proto.ErrNoSpace},
		{"unknown", fmt.Errorf("something odd"), proto.ErrServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorCode(tt.err); got != tt.code {
				t.Fatalf("errorCode(%v) = %v, want %v", tt.err, got, tt.code)
			}
		})
	}
	if msg := errorMessage(wrap(origin.ErrUnavailable)); !strings.HasPrefix(msg, "origin unreachable: ") {
		t.Fatalf("unavailable message %q", msg)
	}
}
