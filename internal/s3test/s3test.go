// Package s3test starts a real S3 server (versitygw, package s3proc) for
// tests. A missing versitygw fails the test when CI=true and skips it
// otherwise, like the other real servers and clients.
package s3test

import (
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/s3proc"
)

// Start runs versitygw over a fresh directory with bucket created, and
// stops it when the test ends (printing its log if the test failed).
func Start(tb testing.TB, bucket string) *s3proc.Server {
	tb.Helper()
	if _, err := s3proc.Binary(); err != nil {
		realclient.Missing(tb, "%v", err)
	}
	s, err := s3proc.Start(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("versitygw at %s:\n%s", s.Addr, s.Log())
		}
	})
	if bucket != "" {
		if err := s.CreateBucket(bucket); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// Put stores data as bucket/key and returns its ETag, failing the test on
// error.
func Put(tb testing.TB, s *s3proc.Server, bucket, key string, data []byte) string {
	tb.Helper()
	etag, err := s.Put(bucket, key, data, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return etag
}
