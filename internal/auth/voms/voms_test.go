package voms

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/auth/x509proxy"
)

func TestParseFQAN(t *testing.T) {
	for _, tc := range []struct{ in, group, role string }{
		{"/cms/Role=NULL/Capability=NULL", "/cms", ""},
		{"/cms/uscms/Role=production/Capability=NULL", "/cms/uscms", "production"},
		{"/atlas/lcg1", "/atlas/lcg1", ""},
		{"/atlas/Role=pilot", "/atlas", "pilot"},
	} {
		f, err := ParseFQAN(tc.in)
		if err != nil || f.Group != tc.group || f.Role != tc.role {
			t.Errorf("ParseFQAN(%q) = %+v, %v", tc.in, f, err)
		}
	}
	for _, bad := range []string{"", "cms", "/", "/Role=x", "/cms/../atlas", "/cms//x", "/cms/Role=a/sub"} {
		if f, err := ParseFQAN(bad); err == nil {
			t.Errorf("ParseFQAN(%q) = %+v, want error", bad, f)
		}
	}
}

type fixture struct {
	ca      *authtest.CA
	user    *authtest.Cred
	srv     *authtest.VOMSServer
	vomsdir string
	v       *Verifier
}

func newFixture(t *testing.T, lsc bool) *fixture {
	t.Helper()
	f := &fixture{ca: authtest.NewCA(t, "Test CA"), vomsdir: t.TempDir()}
	f.user = f.ca.User(t, "alice", 0)
	f.srv = f.ca.VOMSServer(t, "cms", "voms.cms.example", 2)
	if lsc {
		f.srv.WriteLSC(t, f.vomsdir)
	} else {
		f.srv.WritePEM(t, f.vomsdir)
	}
	var err error
	f.v, err = New(&Config{Dir: f.vomsdir, Roots: authtest.Pool(f.ca), Targets: []string{"cache.example"}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestVerifyThroughProxy(t *testing.T) {
	for _, mode := range []string{"lsc", "pem"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode == "lsc")
			fqans := []string{"/cms/Role=NULL/Capability=NULL", "/cms/uscms/Role=production/Capability=NULL"}
			ac := f.srv.AC(t, f.user.Cert, authtest.ACOpts{FQANs: fqans, NoCerts: mode == "pem"})
			proxy := f.user.Proxy(t, authtest.ProxyOpts{VOMS: authtest.VOMSExtension(ac)})
			// A further delegation keeps the AC of the first proxy.
			leaf := proxy.Proxy(t, authtest.ProxyOpts{})
			xv, _ := x509proxy.New(&x509proxy.Config{Roots: authtest.Pool(f.ca)})
			ch, err := xv.Verify(leaf.Chain)
			if err != nil {
				t.Fatal(err)
			}
			attrs, err := f.v.Verify(ch)
			if err != nil {
				t.Fatal(err)
			}
			if len(attrs) != 1 || attrs[0].VO != "cms" || len(attrs[0].FQANs) != 2 || attrs[0].FQANs[1] != fqans[1] || attrs[0].Host != "voms.cms.example" {
				t.Fatalf("attributes %+v", attrs)
			}
			if attrs[0].Server != authtest.DN(f.srv.Cert) {
				t.Errorf("server %q", attrs[0].Server)
			}
		})
	}
}

func TestNoVOMSExtension(t *testing.T) {
	f := newFixture(t, true)
	xv, _ := x509proxy.New(&x509proxy.Config{Roots: authtest.Pool(f.ca)})
	ch, err := xv.Verify(f.user.Proxy(t, authtest.ProxyOpts{}).Chain)
	if err != nil {
		t.Fatal(err)
	}
	if attrs, err := f.v.Verify(ch); err != nil || attrs != nil {
		t.Fatalf("plain proxy: %v, %v", attrs, err)
	}
}

func TestRejectedACs(t *testing.T) {
	f := newFixture(t, true)
	other := authtest.NewCA(t, "Other CA")
	rogue := other.VOMSServer(t, "cms", "voms.cms.example", 3) // same names, untrusted CA
	atlas := f.ca.VOMSServer(t, "atlas", "voms.atlas.example", 3)
	bob := f.ca.User(t, "bob", 1)
	cases := []struct {
		name string
		ac   []byte
		want string
	}{
		{"expired", f.srv.AC(t, f.user.Cert, authtest.ACOpts{NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}), "not now"},
		{"issued to someone else", f.srv.AC(t, bob.Cert, authtest.ACOpts{}), "issued to certificate"},
		{"wrong holder serial", f.srv.AC(t, f.user.Cert, authtest.ACOpts{HolderSerial: 42}), "issued to certificate"},
		{"bad signature", f.srv.AC(t, f.user.Cert, authtest.ACOpts{CorruptSignature: true}), "signature"},
		{"untrusted CA behind LSC", rogue.AC(t, f.user.Cert, authtest.ACOpts{}), "unknown authority"},
		{"VO without trust", atlas.AC(t, f.user.Cert, authtest.ACOpts{}), "not trusted"},
		{"FQAN of another VO", f.srv.AC(t, f.user.Cert, authtest.ACOpts{FQANs: []string{"/atlas/Role=NULL"}}), "outside the VO"},
		{"LSC without certs", f.srv.AC(t, f.user.Cert, authtest.ACOpts{NoCerts: true}), "no server certificate"},
		{"other target", f.srv.AC(t, f.user.Cert, authtest.ACOpts{Targets: []string{"other.example"}}), "targets"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := f.v.VerifyAC(tc.ac, f.user.Cert)
			if err == nil {
				t.Fatalf("accepted: %+v", a)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	// A matching target is accepted.
	if _, err := f.v.VerifyAC(f.srv.AC(t, f.user.Cert, authtest.ACOpts{Targets: []string{"cache.example"}}), f.user.Cert); err != nil {
		t.Fatalf("matching target: %v", err)
	}
}

func TestLSCMismatch(t *testing.T) {
	f := newFixture(t, true)
	p := filepath.Join(f.vomsdir, "cms", "voms.cms.example.lsc")
	if err := os.WriteFile(p, []byte("/DC=org/DC=hepcache-test/OU=Hosts/CN=other.example\n"+authtest.DN(f.ca.Cert)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.v.Reload(); err != nil {
		t.Fatal(err)
	}
	_, err := f.v.VerifyAC(f.srv.AC(t, f.user.Cert, authtest.ACOpts{}), f.user.Cert)
	if err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("LSC naming another server: %v", err)
	}
}

func TestExtractACsMalformed(t *testing.T) {
	for _, b := range [][]byte{nil, {0x30}, {0x30, 0x02, 0x04, 0x00}, {0x04, 0x00}} {
		if _, err := ExtractACs(b); err == nil {
			t.Errorf("ExtractACs(%x) accepted", b)
		}
	}
	for _, b := range [][]byte{nil, {0x30, 0x00}, {0x30, 0x03, 0x30, 0x01, 0x00}} {
		if _, err := ParseAC(b); err == nil {
			t.Errorf("ParseAC(%x) accepted", b)
		}
	}
}
