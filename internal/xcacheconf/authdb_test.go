package xcacheconf

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/auth/voms"
	"github.com/hepcache/hepcache/internal/auth/x509proxy"
	"github.com/hepcache/hepcache/internal/authz"
	"github.com/hepcache/hepcache/internal/config"
)

// authorizer builds the authorizer serve would from c's rules.
func authorizer(tb testing.TB, c *config.Config) *authz.Authorizer {
	tb.Helper()
	var rules []authz.Rule
	for _, r := range c.Security.Rules {
		rules = append(rules, authz.Rule{Path: r.Path, Read: r.Read, Fetch: r.Fetch, Deny: r.Deny, Prefix: r.Match == "prefix"})
	}
	a, err := authz.New(&authz.Config{Rules: rules})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// Subjects as XRootD would see them: a gsi proxy mapped by the grid map, a
// VOMS member, a token holder, nobody.
var (
	anonymous = &authz.Subject{Name: "nobody"}
	gsiUser   = func(name string) *authz.Subject {
		return &authz.Subject{X509: &x509proxy.Chain{Subject: "/CN=" + name}, User: name}
	}
	vomsUser = func(fqan string) *authz.Subject {
		vo, _, _ := strings.Cut(strings.TrimPrefix(fqan, "/"), "/")
		return &authz.Subject{X509: &x509proxy.Chain{Subject: "/CN=member"}, VOMS: []voms.Attributes{{VO: vo, FQANs: []string{fqan + "/Role=NULL/Capability=NULL"}}}}
	}
	tokenHolder = func(iss string, scopes []token.Scope, groups ...string) *authz.Subject {
		return &authz.Subject{Token: &token.Claims{Issuer: iss, Subject: "t", Scopes: scopes, Groups: groups}}
	}
)

type decision struct {
	who  string
	s    *authz.Subject
	path string
	read bool
}

func checkDecisions(t *testing.T, a *authz.Authorizer, cases []decision, toml []byte) {
	t.Helper()
	for _, d := range cases {
		if got := a.Decide(d.s, d.path); got.Read != d.read {
			t.Errorf("%s reading %s: %+v, want read %v (XRootD's answer)", d.who, d.path, got, d.read)
		}
	}
	if t.Failed() {
		t.Logf("translated:\n%s", toml)
	}
}

// TestParsePrivs: privilege strings as XrdAccConfig::PrivsConvert reads
// them, '-' anywhere, once.
func TestParsePrivs(t *testing.T) {
	for s, want := range map[string][2]int{
		"rl": {privRead | privLookup, 0}, "-rl": {0, privRead | privLookup}, "a-r": {privAll, privRead},
		"r-": {privRead, 0}, "a": {privAll, 0}, "lr-w": {privRead | privLookup, 0x40}, "": {0, 0},
	} {
		pos, neg, err := parsePrivs(s)
		if err != nil || pos != want[0] || neg != want[1] {
			t.Errorf("parsePrivs(%q) = %#x %#x %v, want %#x %#x", s, pos, neg, err, want[0], want[1])
		}
	}
	for _, s := range []string{"--r", "r-l-", "rx", "R"} {
		if _, _, err := parsePrivs(s); err == nil {
			t.Errorf("parsePrivs(%q) accepted", s)
		}
	}
}

// TestAuthdbAsXRootD: each authdb decides here as XRootD 5.5.3 decides it
// (XrdAccAccess::Access): every identity that matches a client adds the
// first capability of its line whose path starts the request path, and
// what any of them takes away wins. The same authdbs are decided by the
// real XRootD in internal/e2e's TestAuthdbAgainstXRootD.
func TestAuthdbAsXRootD(t *testing.T) {
	alice, bob, carol := gsiUser("alice"), gsiUser("bob"), gsiUser("carol")
	escms := vomsUser("/cms/escms")
	for _, tc := range []struct {
		name, authdb string
		cases        []decision
	}{
		{"ban", "u * /store/test rl /store rl\nu alice /store -rl\ng /cms/escms /store -rl\nu bob /store rl\n", []decision{
			{"anonymous", anonymous, "/store/f", true},
			{"alice", alice, "/store/f", false},
			{"alice in /store/test", alice, "/store/test/f", false},
			{"bob", bob, "/store/f", true},
			{"carol", carol, "/store/f", true},
			{"an escms member", escms, "/store/test/f", false},
			{"anonymous outside", anonymous, "/other/f", false},
			{"anonymous, string prefix", anonymous, "/store2/f", true},
		}},
		{"a-r takes read away from all", "u * /store a-r\n", []decision{
			{"anonymous", anonymous, "/store/f", false},
			{"alice", alice, "/store/f", false},
		}},
		{"first capability of a line wins", "u * / rl /store -rl\nu alice /data -r /data rl\n", []decision{
			{"anonymous in /store", anonymous, "/store/f", true},
			{"alice in /data", alice, "/data/f", false},
			{"alice elsewhere", alice, "/x", true},
		}},
		{"protected below open", "u * /ospool/PROTECTED -rl / rl\ng /osg /ospool/PROTECTED/osg rl\ng /cms /store -rl /store/mc rl\n", []decision{
			{"anonymous", anonymous, "/ospool/public/f", true},
			{"anonymous protected", anonymous, "/ospool/PROTECTED/f", false},
			{"osg member protected", vomsUser("/osg"), "/ospool/PROTECTED/osg/f", false},
			{"cms member in /store/mc", vomsUser("/cms"), "/store/mc/f", false},
			{"others in /store/mc", alice, "/store/mc/f", true},
		}},
		{"templates in place", "t priv /priv/ -rl /pub rl\nu alice priv /priv/alice rl\nu * /pub rl\n", []decision{
			{"alice private", alice, "/priv/alice/f", false},
			{"alice public", alice, "/pub/f", true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, c := translated(t, write(t, "xcache.cfg", base+"ofs.authorize 1\nacc.authdb authdb\nsec.protocol gsi -certdir:/etc/grid-security/certificates -cert:/etc/c.pem -key:/etc/k.pem -gridmap:/etc/grid-security/grid-mapfile -vomsfun:default\n", "authdb", tc.authdb), TranslateOptions{})
			checkDecisions(t, authorizer(t, c), tc.cases, res.TOML)
		})
	}
}

// TestAuthdbRefused: what makes xrootd refuse the authdb (and not start)
// fails the translation, with the line.
func TestAuthdbRefused(t *testing.T) {
	for name, db := range map[string]string{
		"duplicate id":     "u * /store rl\nu * /store/test rl\n",
		"two minus":        "u * /store r-l-r\n",
		"unknown letter":   "u * /store rx\n",
		"missing privs":    "u * /store\n",
		"missing template": "u alice tmpl\n",
		"bad id type":      "q alice /store rl\n",
		"inline comment":   "u * /store rl # anyone\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Translate(write(t, "xcache.cfg", base+"ofs.authorize 1\nacc.authdb authdb\n", "authdb", db), TranslateOptions{})
			if err == nil || !strings.Contains(err.Error(), "authdb:") {
				t.Fatalf("translated: %v", err)
			}
		})
	}
}

// TestAuthdbWider: a right taken away from an identity hepcache cannot
// name (a host, a Unix group, an exclusive rule) fails the translation:
// those clients would keep what other lines grant.
func TestAuthdbWider(t *testing.T) {
	for name, db := range map[string]string{
		"host":       "u * /store rl\nh badhost.example /store -rl\n",
		"unix group": "u * /store rl\ng wheel /store -r\n",
		"dn hash":    "u * /store rl\nu 1a2b3c4d.0 /store -rl\n",
		"exclusive":  "= prod o cms r production\nx prod /store rl\nu * /store rl\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Translate(write(t, "xcache.cfg", base+"ofs.authorize 1\nacc.authdb authdb\n", "authdb", db), TranslateOptions{})
			if !errors.Is(err, ErrWider) {
				t.Fatalf("translated: %v", err)
			}
		})
	}
}

// TestSciTokensChain: with ofs.authlib ++ the token decides first and the
// authdb is the fallback (a token for read:/data/PROTECTED reads there
// although the authdb takes read away from everyone); without ++, or with
// onmissing = deny, the authdb is not consulted at all; onmissing = allow
// lets everyone read.
func TestSciTokensChain(t *testing.T) {
	const iss = "https://tokens.example/ospool"
	sci := "[Global]\naudience = https://cache.example\n%s\n[Issuer ap40]\nissuer = " + iss + "\nbase_path = /ospool/ap40\n%s"
	db := "u * /ospool/ap40/data/PROTECTED -rl / rl\n"
	scoped := tokenHolder(iss, []token.Scope{{Op: "read", Path: "/ospool/ap40/data/PROTECTED"}})
	unscoped := tokenHolder(iss, []token.Scope{{Op: "read", Path: "/ospool/ap40/data/other"}})
	for _, tc := range []struct {
		name, lib, global, issuer string
		cases                     []decision
	}{
		{"chained", "++ ", "", "", []decision{
			{"token with scope", scoped, "/ospool/ap40/data/PROTECTED/f", true},
			{"token without scope there", unscoped, "/ospool/ap40/data/PROTECTED/f", false},
			{"anonymous", anonymous, "/ospool/ap40/data/PROTECTED/f", false},
			{"anonymous elsewhere", anonymous, "/public/f", true},
		}},
		{"alone", "", "", "", []decision{
			{"token with scope", scoped, "/ospool/ap40/data/PROTECTED/f", true},
			{"anonymous elsewhere", anonymous, "/public/f", false},
		}},
		{"onmissing deny", "++ ", "onmissing = deny", "", []decision{
			{"token with scope", scoped, "/ospool/ap40/data/PROTECTED/f", true},
			{"anonymous elsewhere", anonymous, "/public/f", false},
		}},
		{"onmissing allow", "++ ", "onmissing = allow", "", []decision{
			{"anonymous", anonymous, "/ospool/ap40/data/PROTECTED/f", true},
		}},
		{"authorization_strategy mapping", "++ ", "", "authorization_strategy = mapping\n", []decision{
			{"token with scope", scoped, "/ospool/ap40/data/PROTECTED/f", false},
			{"token elsewhere", scoped, "/public/f", true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := write(t, "xcache.cfg", base+"ofs.authorize 1\nacc.authdb authdb\nofs.authlib "+tc.lib+"libXrdAccSciTokens.so config=scitokens.cfg\n",
				"authdb", db, "scitokens.cfg", strings.Replace(strings.Replace(sci, "%s", tc.global, 1), "%s", tc.issuer, 1))
			res, c := translated(t, cfg, TranslateOptions{})
			a := authorizer(t, c)
			// The token package drops the scopes an issuer does not
			// authorize with; do as it does.
			for i := range c.Security.Issuers {
				if c.Security.Issuers[i].IgnoreScopes {
					scoped.Token.Scopes, unscoped.Token.Scopes = nil, nil
				}
			}
			checkDecisions(t, a, tc.cases, res.TOML)
			scoped.Token.Scopes = []token.Scope{{Op: "read", Path: "/ospool/ap40/data/PROTECTED"}}
			unscoped.Token.Scopes = []token.Scope{{Op: "read", Path: "/ospool/ap40/data/other"}}
		})
	}
}

// TestVOMSOnlyWhereXCacheExtractedIt: without -vomsfun XCache's gsi
// clients have no VO, group or role, so the authdb's o and g lines match
// no certificate there: hepcache does not verify VOMS attributes either.
func TestVOMSOnlyWhereXCacheExtractedIt(t *testing.T) {
	gsi := "sec.protocol gsi -certdir:/etc/grid-security/certificates -cert:/etc/c.pem -key:/etc/k.pem -vomsdir:/etc/grid-security/vomsdir"
	_, c := translated(t, write(t, "xcache.cfg", base+gsi+"\n"), TranslateOptions{})
	eq(t, "vomsdir without -vomsfun", c.Security.VOMSDir, "")
	_, c = translated(t, write(t, "xcache.cfg", base+gsi+" -vomsfun:/usr/lib64/libXrdVoms.so\n"), TranslateOptions{})
	eq(t, "vomsdir with -vomsfun", c.Security.VOMSDir, "/etc/grid-security/vomsdir")
}

// TestGSIOptions: XrdSecgsi's options that decide who authenticates are
// carried over (-crl, -crldir, -crlrefresh, -vomsat, -gmapopt) or fail
// the translation (-dlgpxy, -crlext, -authzfun); none is dropped without
// a word.
func TestGSIOptions(t *testing.T) {
	gsi := "sec.protocol gsi -certdir:/etc/grid-security/certificates -cert:/etc/c.pem -key:/etc/k.pem "
	res, c := translated(t, write(t, "xcache.cfg", base+gsi+"-crl:require,updt -crldir:/etc/crls -crlrefresh:3600 -vomsfun:default -vomsat:require -gmapopt:2 -gridmap:/etc/gm -cipher:aes-256-cbc\n"), TranslateOptions{})
	eq(t, "crl", c.Security.CRL, "require")
	eq(t, "crl_dirs", strings.Join(c.Security.CRLDirs, " "), "/etc/crls")
	eq(t, "crl_refresh", c.Security.CRLRefresh.String(), "1h0m0s")
	eq(t, "voms_required", c.Security.VOMSRequired, true)
	eq(t, "gridmap_required", c.Security.GridMapRequired, true)
	w := strings.Join(res.Warnings, "\n")
	for _, want := range []string{"fetch-crl", "-cipher"} {
		if !strings.Contains(w, want) {
			t.Errorf("no warning mentions %q:\n%s", want, w)
		}
	}
	_, c = translated(t, write(t, "xcache.cfg", base+gsi+"-crl:0\n"), TranslateOptions{})
	eq(t, "crl", c.Security.CRL, "ignore")
	_, c = translated(t, write(t, "xcache.cfg", base+gsi+"\n"), TranslateOptions{})
	eq(t, "crl by default", c.Security.CRL, "try") // XRootD's default, hepcache's
	for _, opt := range []string{"-dlgpxy:request", "-crlext:.pem", "-authzfun:libXrdSecgsiAUTHZVO.so"} {
		if _, err := Translate(write(t, "xcache.cfg", base+gsi+opt+"\n"), TranslateOptions{}); !errors.Is(err, ErrWider) {
			t.Errorf("%s: %v", opt, err)
		}
	}
}

// TestAllowPatterns: XRootD's host patterns (one * anywhere) are carried;
// an entry that cannot be (a netgroup) refuses its clients and is named,
// and the translation fails only when no entry is left (every host could
// connect), saying so.
func TestAllowPatterns(t *testing.T) {
	res, c := translated(t, write(t, "xcache.cfg", base+"xrd.allow host wn*.t2.example.edu\nxrd.allow host +trusted\nxrd.allow host *.cern.ch\n"), TranslateOptions{})
	eq(t, "allow_hosts", strings.Join(c.Security.AllowHosts, " "), "wn*.t2.example.edu *.cern.ch")
	if w := strings.Join(res.Warnings, "\n"); !strings.Contains(w, "+trusted") || !strings.Contains(w, "netgroup") || strings.Contains(w, "every host may connect") {
		t.Errorf("warnings: %s", w)
	}
	_, err := Translate(write(t, "xcache.cfg", base+"xrd.allow netgroup trusted\n"), TranslateOptions{})
	if !errors.Is(err, ErrWider) || !strings.Contains(err.Error(), "every host may connect") {
		t.Errorf("only a netgroup: %v", err)
	}
}

// TestKeepsPackagedKeys (issue 34 item 6): translating over the packaged
// hepcache.toml keeps what the translation does not set (metrics_listen,
// access_log: /metrics, /health and the access log stayed off), and the
// translation wins where both have a key.
func TestKeepsPackagedKeys(t *testing.T) {
	packaged, err := os.ReadFile("../../packaging/hepcache.toml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Translate(write(t, "xcache.cfg", base+"xrd.port 1095\n"), TranslateOptions{Base: packaged, BaseName: "/etc/hepcache/hepcache.toml"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(res.TOML)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.TOML)
	}
	eq(t, "server.metrics_listen", c.Server.MetricsListen, "127.0.0.1:9101")
	eq(t, "log.access_log", c.Log.AccessLog, "/var/log/hepcache/access.log")
	eq(t, "server.listen", c.Server.Listen, ":1095")
	eq(t, "cache.dir", c.Cache.Dir, "/srv/xcache/.hepcache")
	eq(t, "origin.default", c.Origin.Default, "root://origin.example.org:1094")
	if !strings.Contains(string(res.TOML), "kept from /etc/hepcache/hepcache.toml") {
		t.Errorf("kept keys do not say where they come from:\n%s", res.TOML)
	}
}
