// Package xrdtest starts real C++ XRootD servers on loopback for tests (a
// thin testing layer over package xrdproc): a plain origin serving a
// directory and an XCache 5.5.3 anchor in front of an origin. Servers are
// killed at cleanup and print their log when the test fails.
package xrdtest

import (
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdproc"
)

// RequireTool returns the path of the executable name, failing the test in
// CI and skipping it otherwise when it is missing (realclient.Require).
func RequireTool(tb testing.TB, name string) string {
	tb.Helper()
	return realclient.Require(tb, name)
}

// Server is a running C++ xrootd.
type Server = xrdproc.Server

// OriginOptions tune StartOrigin.
type OriginOptions = xrdproc.OriginOptions

// XCacheOptions tune StartXCache.
type XCacheOptions = xrdproc.XCacheOptions

// StartOrigin starts an xrootd that exports dataDir read-only as "/", with
// adler32 checksums. See xrdproc.StartOrigin.
func StartOrigin(tb testing.TB, dataDir string, opts ...func(*OriginOptions)) *Server {
	tb.Helper()
	RequireTool(tb, "xrootd")
	s, err := xrdproc.StartOrigin(dataDir, opts...)
	if err != nil {
		tb.Fatalf("xrdtest: %v", err)
	}
	cleanup(tb, s)
	return s
}

// StartXCache starts XRootD 5.5.3's caching proxy in front of the origin at
// originAddr. See xrdproc.StartXCache.
func StartXCache(tb testing.TB, originAddr, cacheDir string, opts XCacheOptions) *Server {
	tb.Helper()
	RequireTool(tb, "xrootd")
	s, err := xrdproc.StartXCache(originAddr, cacheDir, opts)
	if err != nil {
		tb.Fatalf("xrdtest: %v", err)
	}
	cleanup(tb, s)
	return s
}

// StartConfigFile starts an xrootd on the configuration file cfgFile.
// See xrdproc.StartConfigFile.
func StartConfigFile(tb testing.TB, kind, dir, cfgFile string) *Server {
	tb.Helper()
	RequireTool(tb, "xrootd")
	s, err := xrdproc.StartConfigFile(kind, dir, cfgFile)
	if err != nil {
		tb.Fatalf("xrdtest: %v", err)
	}
	cleanup(tb, s)
	return s
}

// StartRedirector starts a C++ xrootd and cmsd in the manager role, for
// data servers to subscribe to at CMSAddr. See xrdproc.StartRedirector.
func StartRedirector(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	RequireTool(tb, "xrootd")
	RequireTool(tb, "cmsd")
	s, err := xrdproc.StartRedirector(extra...)
	if err != nil {
		tb.Fatalf("xrdtest: %v", err)
	}
	cleanup(tb, s)
	return s
}

func cleanup(tb testing.TB, s *Server) {
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("xrdtest: log of the xrootd at %s:\n%s", s.Addr, s.Log())
			if s.CMSAddr != "" {
				tb.Logf("xrdtest: log of the cmsd at %s:\n%s", s.CMSAddr, s.CmsdLog())
			}
		}
		s.Remove()
	})
}

// Chown gives the files written into a served directory after the server
// started to the server user (no-op unless running as root).
func Chown(tb testing.TB, paths ...string) {
	tb.Helper()
	if err := xrdproc.GiveToServerUser(paths...); err != nil {
		tb.Fatalf("xrdtest: %v", err)
	}
}

// GSIOptions are the credentials of a gsi-only origin.
type GSIOptions struct {
	// CertDir is the hashed CA directory verifying clients' proxies.
	CertDir string
	// CertFile and KeyFile are the host certificate and its RSA key (mode
	// 0600 or 0400, as XrdSecgsi demands).
	CertFile, KeyFile string
}

// StartGSIOrigin starts an origin like StartOrigin that admits only
// clients authenticating with gsi (`sec.protbind * only gsi`).
func StartGSIOrigin(tb testing.TB, dataDir string, g GSIOptions, opts ...func(*OriginOptions)) *Server {
	tb.Helper()
	Chown(tb, g.CertDir, g.CertFile, g.KeyFile)
	return StartOrigin(tb, dataDir, append(opts, func(o *OriginOptions) {
		o.Config = append(o.Config,
			"xrootd.seclib libXrdSec.so",
			"sec.protocol gsi -certdir:"+g.CertDir+" -cert:"+g.CertFile+" -key:"+g.KeyFile+" -crl:0 -gmapopt:0",
			"sec.protbind * only gsi")
	})...)
}
