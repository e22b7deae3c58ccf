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
