package authz

import (
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/auth/voms"
	"github.com/hepcache/hepcache/internal/auth/x509proxy"
)

func TestDecide(t *testing.T) {
	a, err := New(&Config{Rules: []Rule{
		{Path: "/", Read: []string{"none"}},
		{Path: "/public", Read: []string{"anonymous"}, Fetch: []string{"authenticated"}},
		{Path: "/store", Read: []string{"scope", "vo:cms"}, Fetch: []string{"scope:stage", "group:/cms/uscms", "fqan:/cms/Role=production"}},
		{Path: "/store/user/alice", Read: []string{"dn:/DC=org/CN=alice", "issuer:https://iss.example"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	anon := &Subject{Name: "nobody"}
	readTok := &Subject{Token: &token.Claims{Issuer: "https://other.example", Subject: "r", Scopes: []token.Scope{{Op: "read", Path: "/store/mc"}}}}
	stageTok := &Subject{Token: &token.Claims{Issuer: "https://other.example", Subject: "s", Scopes: []token.Scope{{Op: "read", Path: "/store"}, {Op: "stage", Path: "/store/mc"}}}}
	groupTok := &Subject{Token: &token.Claims{Issuer: "https://iss.example", Subject: "g", Groups: []string{"/cms", "/cms/uscms"}}}
	atlasTok := &Subject{Token: &token.Claims{Issuer: "https://other.example", Subject: "x", Groups: []string{"/atlas"}}}
	cmsUser := &Subject{X509: &x509proxy.Chain{Subject: "/DC=org/CN=bob"}, VOMS: []voms.Attributes{{VO: "cms", FQANs: []string{"/cms/Role=NULL/Capability=NULL"}}}}
	cmsProd := &Subject{X509: &x509proxy.Chain{Subject: "/DC=org/CN=prod"}, VOMS: []voms.Attributes{{VO: "cms", FQANs: []string{"/cms/Role=production/Capability=NULL"}}}}
	alice := &Subject{X509: &x509proxy.Chain{Subject: "/DC=org/CN=alice"}}

	cases := []struct {
		name        string
		s           *Subject
		path        string
		read, fetch bool
		reason      string
	}{
		{"anonymous public", anon, "/public/f", true, false, "only if it is cached"},
		{"token public", readTok, "/public/f", true, true, ""},
		{"anonymous root", anon, "/etc/passwd", false, false, "may not read"},
		{"anonymous store", anon, "/store/mc/f", false, false, "anonymous client may not read /store/mc/f"},
		{"read scope inside", readTok, "/store/mc/f", true, false, "scope:stage"},
		{"read scope outside", readTok, "/store/data/f", false, false, "may not read"},
		{"read scope prefix trick", readTok, "/store/mcx/f", false, false, "may not read"},
		{"stage scope", stageTok, "/store/mc/f", true, true, ""},
		{"stage scope outside its path", stageTok, "/store/data/f", true, false, ""},
		{"token group", groupTok, "/store/data/f", true, true, ""},
		{"other VO token", atlasTok, "/store/data/f", false, false, ""},
		{"VOMS member", cmsUser, "/store/data/f", true, false, ""},
		{"VOMS role", cmsProd, "/store/data/f", true, true, ""},
		{"longest rule wins: dn", alice, "/store/user/alice/f", true, true, ""},
		{"longest rule wins: VO not enough", cmsUser, "/store/user/alice/f", false, false, ""},
		{"longest rule wins: issuer", groupTok, "/store/user/alice/x", true, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := a.Decide(tc.s, tc.path)
			if d.Read != tc.read || d.Fetch != tc.fetch {
				t.Fatalf("Decide = %+v, want read %v fetch %v", d, tc.read, tc.fetch)
			}
			if !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason %q does not mention %q", d.Reason, tc.reason)
			}
		})
	}
}

func TestNoRulesAllowsEverything(t *testing.T) {
	a, err := New(&Config{})
	if err != nil {
		t.Fatal(err)
	}
	if d := a.Decide(nil, "/x"); !d.Read || !d.Fetch {
		t.Fatalf("%+v", d)
	}
}

func TestUncoveredPathDenied(t *testing.T) {
	a, _ := New(&Config{Rules: []Rule{{Path: "/store", Read: []string{"anonymous"}}}})
	if d := a.Decide(nil, "/other"); d.Read || !strings.Contains(d.Reason, "no authorization rule") {
		t.Fatalf("%+v", d)
	}
}

func TestConfigErrors(t *testing.T) {
	_, err := New(&Config{Rules: []Rule{
		{Path: "relative", Read: []string{"anonymous"}},
		{Path: "/a", Read: nil},
		{Path: "/b", Read: []string{"wizard"}},
		{Path: "/c", Read: []string{"group:cms"}, Fetch: []string{"scope:write"}},
		{Path: "/d/", Read: []string{"fqan:cms"}},
		{Path: "/d", Read: []string{"anonymous"}},
	}})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"absolute", "read is empty", "unknown principal", "a group is a path", "read or stage", "two rules", "FQAN"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestDeny: a rule's deny list takes away what its read list grants, from
// whoever matches it (XRootD's negative rights), except a token whose
// scope grants the path (the SciTokens library decides first).
func TestDeny(t *testing.T) {
	a, err := New(&Config{Rules: []Rule{
		{Path: "/store", Read: []string{"anonymous", "scope"}, Deny: []string{"user:alice", "group:/cms/escms"}},
		{Path: "/store/test", Read: []string{"anonymous"}},
		{Path: "/fetchy", Read: []string{"anonymous"}, Fetch: []string{"authenticated"}, Deny: []string{"org:cms"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cert := func(dn, user string, fqans ...string) *Subject {
		s := &Subject{X509: &x509proxy.Chain{Subject: dn}, User: user}
		if len(fqans) > 0 {
			s.VOMS = []voms.Attributes{{VO: "cms", FQANs: fqans}}
		}
		return s
	}
	alice := cert("/CN=alice", "alice")
	bob := cert("/CN=bob", "bob")
	escms := cert("/CN=carol", "", "/cms/escms/Role=NULL/Capability=NULL")
	scoped := &Subject{Token: &token.Claims{Issuer: "https://iss", Subject: "t", Groups: []string{"/cms/escms"}, Scopes: []token.Scope{{Op: "read", Path: "/store/data"}}}}
	cases := []struct {
		name        string
		s           *Subject
		path        string
		read, fetch bool
		reason      string
	}{
		{"anonymous", nil, "/store/f", true, true, ""},
		{"denied user", alice, "/store/f", false, false, "rule /store denies user:alice"},
		{"other user", bob, "/store/f", true, true, ""},
		{"denied group", escms, "/store/f", false, false, "denies group:/cms/escms"},
		{"token group denied outside its scope", scoped, "/store/mc/f", false, false, "denies group:/cms/escms"},
		{"token scope decides before deny", scoped, "/store/data/f", true, true, ""},
		{"a longer rule without the deny", alice, "/store/test/f", true, true, ""},
		{"deny takes fetch too", cert("/CN=dave", "", "/cms/Role=NULL/Capability=NULL"), "/fetchy/f", false, false, "denies org:cms"},
		{"fetch without deny", bob, "/fetchy/f", true, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := a.Decide(tc.s, tc.path)
			if d.Read != tc.read || d.Fetch != tc.fetch || !strings.Contains(d.Reason, tc.reason) {
				t.Fatalf("Decide = %+v, want read %v fetch %v reason ~%q", d, tc.read, tc.fetch, tc.reason)
			}
		})
	}
}

// TestPrefixRules: a prefix rule covers paths as an XRootD authdb path
// does, by string prefix; a final slash is kept.
func TestPrefixRules(t *testing.T) {
	a, err := New(&Config{Rules: []Rule{
		{Path: "/store", Prefix: true, Read: []string{"anonymous"}, Deny: []string{"org:https://iss"}},
		{Path: "/data/", Prefix: true, Read: []string{"anonymous"}},
		{Path: "/store/x", Read: []string{"none"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tok := &Subject{Token: &token.Claims{Issuer: "https://iss", Subject: "t"}}
	for p, want := range map[string]bool{"/store2/f": true, "/store/f": true, "/store/x/f": false, "/store/xy": true, "/data/f": true, "/data": false, "/data2/f": false, "/other": false} {
		if d := a.Decide(nil, p); d.Read != want {
			t.Errorf("anonymous %s: %+v, want read %v", p, d, want)
		}
	}
	if d := a.Decide(tok, "/store2/f"); d.Read {
		t.Errorf("org:issuer deny did not apply by prefix: %+v", d)
	}
	if _, err := New(&Config{Rules: []Rule{{Path: "/a", Read: []string{"anonymous"}, Deny: []string{"scope"}}}}); err == nil || !strings.Contains(err.Error(), "takes nothing away") {
		t.Errorf("deny = [scope] accepted: %v", err)
	}
}
