package xcacheconf

import (
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/config"
)

// TestTranslate translates configurations written for these tests in the
// styles real deployments use (OSG's xcache packages, ATLAS and CMS site
// caches, Pelican's generated configs): the result parses as a hepcache
// config, passes its validation, has the values the directives meant, and
// warns about what has no equivalent.
func TestTranslate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opt   Options
		check func(t *testing.T, c *config.Config)
		warns []string
	}{
		{name: "osg", check: func(t *testing.T, c *config.Config) {
			eq(t, "server.listen", c.Server.Listen, ":1094") // not the cmsd's 1213
			eq(t, "origin.default", c.Origin.Default, "root://origin.example.org:1094")
			eq(t, "origin.timeout", c.Origin.Timeout.String(), "2m0s")
			eq(t, "cache.dir", c.Cache.Dir, "/srv/xcache/.hepcache")
			eq(t, "cache.ram", c.Cache.RAM.String(), "0") // pfc.ram is not carried over: warned
			eq(t, "cache.block_size", c.Cache.BlockSize.String(), "1M")
			eq(t, "space.watermarks", c.Space.Watermarks, "0.9,0.95")
			eq(t, "space.purge_interval", c.Space.PurgeInterval.String(), "5m0s")
			eq(t, "monitor.summary", c.Monitor.Summary, "collector.example.org:9931")
			eq(t, "monitor.fstream", c.Monitor.FStream, "collector.example.org:9930")
			eq(t, "monitor.site", c.Monitor.Site, "EXAMPLE_T2")
		}, warns: []string{"pfc.ram 16g: not carried over"}},
		{name: "atlas", opt: Options{Instance: "xcache1"}, check: func(t *testing.T, c *config.Config) {
			eq(t, "server.listen", c.Server.Listen, ":1094")
			eq(t, "origin.forward_allow", strings.Join(c.Origin.ForwardAllow, " "), ".cern.ch .example.org dcache.desy.de:1094")
			eq(t, "cache.data_dirs", strings.Join(c.Cache.DataDirs, " "), "/data1/xcache/.hepcache /data2/xcache/.hepcache")
			eq(t, "cache.prefetch", c.Cache.Prefetch, 0)
			eq(t, "space.max_age", c.Space.MaxAge.String(), "720h0m0s")
			eq(t, "monitor.gstream", c.Monitor.GStream, "monitor.example.org:9000")
			eq(t, "monitor.gstream_header", c.Monitor.GStreamHeader, "json")
			eq(t, "cmsd.manager", c.Cmsd.Manager, "redirector.example.org:1213")
			eq(t, "security.gsi", c.Security.GSI, true)
			eq(t, "security.require_auth", c.Security.RequireAuth, true)
			eq(t, "security.require_tls", c.Security.RequireTLS, false) // capable all
			eq(t, "security.gridmap", c.Security.GridMap, "/etc/grid-security/grid-mapfile")
			eq(t, "security.vomsdir", c.Security.VOMSDir, "/etc/grid-security/vomsdir") // -vomsfun:default
		}, warns: []string{"pss.namelib", "[[map]]"}},
		{name: "cms", check: func(t *testing.T, c *config.Config) {
			eq(t, "origin.default", c.Origin.Default, "root://cms-xrd-global.cern.ch:1094")
			eq(t, "server.http_listen", c.Server.HTTPListen, ":8443")
			eq(t, "cache.block_size", c.Cache.BlockSize.String(), "512K")
			eq(t, "space.capacity", c.Space.Capacity.String(), "200G")
			eq(t, "space.watermarks", c.Space.Watermarks, "100G,150G")
			eq(t, "space.dir_stats_depth", c.Space.DirStatsDepth, 3)
			eq(t, "security.tls_key", c.Security.TLSKey, "/etc/grid-security/xrd/xrdcert.pem")
			eq(t, "security.vomsdir", c.Security.VOMSDir, "/etc/grid-security/vomsdir")
			rules := map[string]string{}
			for _, r := range c.Security.Rules {
				rules[r.Path] = strings.Join(r.Read, " ")
			}
			// Every line whose first path starts the request's adds to it
			// (XRootD's union), not only the longest.
			eq(t, "rule /store", rules["/store"], "group:/cms user:cmsprod")
			eq(t, "rule /store/mc", rules["/store/mc"], "group:/cms org:cms user:cmsprod")
			eq(t, "rule /store/user", rules["/store/user"], "group:/cms anonymous user:cmsprod")
			eq(t, "rule /store/unmerged", rules["/store/unmerged"], "group:/cms user:cmsprod role:production")
			eq(t, "rule /store/temp", rules["/store/temp"], "group:/cms user:cmsprod")
		}, warns: []string{"users cmsprod", "h *.example.org grants read on /store/temp", "files' usage", "decision plugins", "does not speak unix"}},
		{name: "pelican", check: func(t *testing.T, c *config.Config) {
			eq(t, "server.listen", c.Server.Listen, ":8443")
			eq(t, "server.http_listen", c.Server.HTTPListen, ":8444")
			eq(t, "origin.default", c.Origin.Default, "https://origin.example.org:8443")
			eq(t, "cache.block_size", c.Cache.BlockSize.String(), "128K")
			eq(t, "cache.data_dirs", strings.Join(c.Cache.DataDirs, " "), "/run/pelican/cache/data/.hepcache")
			eq(t, "security.require_tls", c.Security.RequireTLS, true)
			eq(t, "security.audiences", strings.Join(c.Security.Audiences, " "), "https://cache.example.org https://wlcg.cern.ch/jwt/v1/any")
			if len(c.Security.Issuers) != 1 || c.Security.Issuers[0].Issuer != "https://tokens.example.org/ospool" || c.Security.Issuers[0].BasePath != "/ospool/protected" {
				t.Errorf("issuers %+v", c.Security.Issuers)
			}
			rules := map[string]string{}
			for _, r := range c.Security.Rules {
				rules[r.Path] = strings.Join(r.Read, " ")
			}
			eq(t, "rule /ospool/public", rules["/ospool/public"], "anonymous scope") // a scope grants only under its base path
			eq(t, "rule /ospool/protected", rules["/ospool/protected"], "scope")
			eq(t, "log.level", c.Log.Level, "debug")
		}, warns: []string{"throttle", "default_user", "md5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opt.Host = "cache01.example.org"
			res, err := Translate("testdata/"+tc.name+"/xcache.cfg", TranslateOptions{Options: tc.opt})
			if err != nil {
				t.Fatal(err)
			}
			c, err := config.Parse(res.TOML)
			if err != nil {
				t.Fatalf("translated config does not parse: %v\n%s", err, res.TOML)
			}
			c.Normalize()
			if err := c.Validate(); err != nil {
				t.Fatalf("translated config does not validate: %v\n%s", err, res.TOML)
			}
			tc.check(t, c)
			all := strings.Join(res.Warnings, "\n")
			for _, w := range tc.warns {
				if !strings.Contains(all, w) {
					t.Errorf("no warning mentions %q:\n%s", w, all)
				}
			}
			if t.Failed() {
				t.Logf("translated:\n%s", res.TOML)
			}
		})
	}
}

// TestForwardingWithoutPermit: XCache forwards anywhere, hepcache never:
// the translation says so and leaves the allow-list to the admin (check
// then fails on it).
func TestForwardingWithoutPermit(t *testing.T) {
	res, err := Translate("testdata/forward.cfg", TranslateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.TOML), "origin.forward_allow") {
		t.Fatalf("no warning about forward_allow:\n%s", res.TOML)
	}
	c, err := config.Parse(res.TOML)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "forward") {
		t.Fatalf("validates without an allow-list: %v", err)
	}
}

func eq[T comparable](t *testing.T, key string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", key, got, want)
	}
}
