package xcacheconf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/config"
)

// write puts files (name -> content) into a new directory and returns the
// path of the first name given.
func write(tb testing.TB, files ...string) string {
	tb.Helper()
	dir := tb.TempDir()
	for i := 0; i+1 < len(files); i += 2 {
		p := filepath.Join(dir, files[i])
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(files[i+1]), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return filepath.Join(dir, files[0])
}

const base = `all.export /
ofs.osslib libXrdPss.so
pss.cachelib libXrdPfc.so
pss.origin origin.example.org:1094
oss.localroot /srv/xcache
`

// translated translates cfg and parses and validates the result.
func translated(tb testing.TB, cfg string, opt TranslateOptions) (*Result, *config.Config) {
	tb.Helper()
	res, err := Translate(cfg, opt)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := config.Parse(res.TOML)
	if err != nil {
		tb.Fatalf("does not parse: %v\n%s", err, res.TOML)
	}
	c.Normalize()
	if err := c.Validate(); err != nil {
		tb.Fatalf("does not validate: %v\n%s", err, res.TOML)
	}
	return res, c
}

func rulesOf(c *config.Config) map[string]string {
	m := map[string]string{}
	for _, r := range c.Security.Rules {
		m[r.Path] = strings.Join(r.Read, " ")
	}
	return m
}

// TestNegativeRights: an authdb taking read rights away (an OSDF stash
// cache's "u * /ospool/PROTECTED -rl / rl") keeps the path closed, also
// against grants below it, as XCache answers 403 there; others keep what
// XRootD gives them.
func TestNegativeRights(t *testing.T) {
	cfg := write(t, "xcache.cfg", base+"ofs.authorize 1\nacc.authdb authdb\n",
		"authdb", "u * /ospool/PROTECTED -rl / rl\ng /osg /ospool/PROTECTED/osg rl\ng /cms /store -rl /store/mc rl\n")
	res, c := translated(t, cfg, TranslateOptions{})
	checkDecisions(t, authorizer(t, c), []decision{
		{"anonymous", anonymous, "/ospool/public/f", true},
		{"anonymous protected", anonymous, "/ospool/PROTECTED/f", false},
		{"osg member below protected", vomsUser("/osg"), "/ospool/PROTECTED/osg/f", false},
		{"cms member in /store", vomsUser("/cms"), "/store/f", false},
		{"cms member in /store/mc", vomsUser("/cms"), "/store/mc/f", false},
		{"anonymous in /store", anonymous, "/store/f", true},
	}, res.TOML)
	if !c.Security.Authorize {
		t.Error("security.authorize not set from ofs.authorize")
	}
}

// TestMissingAuthorizationFiles: an authdb or scitokens.cfg that cannot be
// read fails the translation (xrootd refuses to start), rather than
// producing a cache that lets everyone read.
func TestMissingAuthorizationFiles(t *testing.T) {
	for name, extra := range map[string]string{
		"authdb":    "ofs.authorize 1\nacc.authdb /nonexistent/authdb\n",
		"scitokens": "ofs.authorize 1\nofs.authlib ++ libXrdAccSciTokens.so config=/nonexistent/scitokens.cfg\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Translate(write(t, "xcache.cfg", base+extra), TranslateOptions{})
			if err == nil || !strings.Contains(err.Error(), "/nonexistent/") {
				t.Fatalf("translated: %v", err)
			}
		})
	}
}

// TestAuthorizeRefusesOpenRules: with authorization on, check refuses
// rules that let anyone read everything.
func TestAuthorizeRefusesOpenRules(t *testing.T) {
	for name, toml := range map[string]string{
		"no rules":  "[security]\nauthorize = true\n",
		"only open": "[security]\nauthorize = true\n[[security.rule]]\npath = \"/\"\nread = [\"anonymous\"]\n",
	} {
		c, err := config.Parse([]byte(toml))
		if err != nil {
			t.Fatal(err)
		}
		c.Normalize()
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "security.authorize") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Authorization on and no grant at all: XCache refuses everything.
	_, c := translated(t, write(t, "xcache.cfg", base+"ofs.authorize 1\nacc.authdb authdb\n", "authdb", "h *.example.org /store rl\n"), TranslateOptions{})
	if r := rulesOf(c); r["/"] != "none" {
		t.Errorf("rules %v", r)
	}
}

// TestAccessDirectives: xrd.allow, http.listingdeny, http.gridmap,
// http.tlsclientauth and restricted_path are carried over; what cannot be
// fails the translation unless --allow-wider.
func TestAccessDirectives(t *testing.T) {
	cfg := write(t, "xcache.cfg", base+`xrd.allow host *.site.example
xrd.allow host login.other.example
sec.protocol gsi -certdir:/etc/grid-security/certificates -cert:/etc/c.pem -key:/etc/k.pem
http.listingdeny yes
http.gridmap /etc/grid-security/grid-mapfile required
http.tlsclientauth off
ofs.authorize 1
acc.authdb authdb
ofs.authlib ++ libXrdAccSciTokens.so config=scitokens.cfg
`, "authdb", "u alice /store/user/alice rl\n",
		"scitokens.cfg", "[Issuer cms]\nissuer = https://cms-auth.example/\nbase_path = /\nrestricted_path = /store/cms\naudience = https://cache.example\n")
	res, c := translated(t, cfg, TranslateOptions{})
	s := c.Security
	eq(t, "allow_hosts", strings.Join(s.AllowHosts, " "), "*.site.example login.other.example")
	eq(t, "deny_http_listing", s.DenyHTTPListing, true)
	eq(t, "gridmap", s.GridMap, "/etc/grid-security/grid-mapfile")
	eq(t, "gridmap_required", s.GridMapRequired, true)
	eq(t, "http_client_auth", s.HTTPClientAuth, "off")
	if len(s.Issuers) != 1 || strings.Join(s.Issuers[0].RestrictedPaths, " ") != "/store/cms" {
		t.Errorf("issuers %+v", s.Issuers)
	}
	eq(t, "rule /store/user/alice", rulesOf(c)["/store/user/alice"], "user:alice scope")
	if t.Failed() {
		t.Log(string(res.TOML))
	}

	// What has no equivalent widens access: refused, then allowed.
	wide := write(t, "xcache.cfg", base+"xrd.allow netgroup trusted\nsec.protbind * only krb5\n")
	if _, err := Translate(wide, TranslateOptions{}); !errors.Is(err, ErrWider) || !strings.Contains(err.Error(), "netgroup") || !strings.Contains(err.Error(), "krb5") {
		t.Fatalf("widening translation: %v", err)
	}
	res, _ = translated(t, wide, TranslateOptions{AllowWider: true})
	if !strings.Contains(string(res.TOML), "LESS RESTRICTIVE") {
		t.Errorf("--allow-wider output does not say what was widened:\n%s", res.TOML)
	}
}

// TestMonitoringAndTimeouts: xrootd.monitor options, acc.audit and
// xrd.timeout are translated where hepcache has the feature and warned
// about where not.
func TestMonitoringAndTimeouts(t *testing.T) {
	cfg := write(t, "xcache.cfg", base+`xrootd.monitor all fstat 30s lfn ops xfr 4 ident 5m window 10s dest fstat info user collector.example:9930
acc.audit grant deny
xrd.timeout idle 600 read 30
`)
	res, c := translated(t, cfg, TranslateOptions{})
	eq(t, "monitor.fstream", c.Monitor.FStream, "collector.example:9930")
	eq(t, "monitor.fstream_flush", c.Monitor.FStreamFlush.String(), "30s")
	eq(t, "monitor.xfr_interval", c.Monitor.XfrInterval.String(), "2m0s")
	eq(t, "monitor.ident_interval", c.Monitor.IdentInterval.String(), "5m0s")
	eq(t, "limits.idle_timeout", c.Limits.IdleTimeout.String(), "10m0s")
	w := strings.Join(res.Warnings, "\n")
	for _, want := range []string{"window 10s", "access log", "read: no equivalent"} {
		if !strings.Contains(w, want) {
			t.Errorf("no warning mentions %q:\n%s", want, w)
		}
	}
}

// TestHostileConfigs: a configuration cannot make the translator grow
// without bound, nor quote files that are not configurations, and what
// xrootd itself refuses is warned about.
func TestHostileConfigs(t *testing.T) {
	var b strings.Builder
	b.WriteString("set a = xxxxxxxx\n")
	for range 40 {
		b.WriteString("set a = $(a)$(a)\n")
	}
	if _, err := Translate(write(t, "xcache.cfg", b.String()), TranslateOptions{}); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("doubling set: %v", err)
	}

	secret := write(t, "shadow", "root:$6$saltsalt$hashhashhash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")
	os.Chmod(secret, 0o600)
	cfg := write(t, "xcache.cfg", base+"continue "+secret+"\n")
	res, err := Translate(cfg, TranslateOptions{})
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if res != nil {
		msg += string(res.TOML) + strings.Join(res.Warnings, "\n")
	}
	if err == nil || strings.Contains(msg, "hashhash") || strings.Contains(msg, "saltsalt") {
		t.Errorf("continue into a password file: %v\n%s", err, msg)
	}

	res, _ = translated(t, write(t, "xcache.cfg", base+"if exec xrootd\nif named anon\npfc.ram 2g\nfi\nfi\nsetenv XRD_REQUESTTIMEOUT = 30\n"), TranslateOptions{})
	w := strings.Join(res.Warnings, "\n")
	for _, want := range []string{"nested if", "XRD_REQUESTTIMEOUT"} {
		if !strings.Contains(w, want) {
			t.Errorf("no warning mentions %q:\n%s", want, w)
		}
	}

	// Output from files not everyone may read is written 0600.
	priv := write(t, "xcache.cfg", base)
	os.Chmod(priv, 0o640)
	if res, err := Translate(priv, TranslateOptions{}); err != nil || !res.Private {
		t.Errorf("a 0640 configuration: private %v, %v", res != nil && res.Private, err)
	}
}
