package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestRevokedCertificate (issue 36 item 9): a certificate its CA revoked,
// in a CRL made by openssl's own CA tool and put beside the CA files as
// fetch-crl does (<hash>.r0), no longer reads: not over gsi with the
// Debian xrdcp, not over https with curl, after SIGHUP re-read the CRLs;
// another certificate of the same CA still reads. A real XRootD 5.5.3 with
// gsi -crl:1 (its default) refuses the same proxy.
func TestRevokedCertificate(t *testing.T) {
	realclient.Require(t, "xrdcp")
	curl := realclient.Require(t, "curl")
	openssl := realclient.Require(t, "openssl")
	realclient.RequireFile(t, "/usr/lib/x86_64-linux-gnu/libXrdSecgsi-5.so")
	dir := t.TempDir()
	ca := authtest.NewCA(t, "hepcache crl e2e CA")
	caDir := filepath.Join(dir, "certificates")
	authtest.RequireCADir(t, caDir, ca)
	caPEM, caKey := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	os.WriteFile(caPEM, authtest.CertPEM(ca.Cert), 0o644)
	os.WriteFile(caKey, authtest.KeyPEM(t, ca.Key), 0o600)
	hc, hk := ca.HostKey(t, authtest.RSAKey(t, 3), "localhost").WriteFiles(t, dir, "host")

	data := filepath.Join(dir, "data")
	os.MkdirAll(filepath.Join(data, "store"), 0o755)
	writePattern(t, filepath.Join(data, "store/f.root"), 100000)
	want, _ := os.ReadFile(filepath.Join(data, "store/f.root"))
	origin := xrdtest.StartOrigin(t, data)

	type user struct{ cert, key, proxy string }
	users := map[string]user{}
	for i, name := range []string{"alice", "bob"} {
		u := ca.User(t, name, 1+i)
		c, k := u.WriteFiles(t, dir, name)
		users[name] = user{c, k, u.Proxy(t, authtest.ProxyOpts{Key: authtest.RSAKey(t, 6)}).WriteProxyFile(t, dir, "x509up_"+name)}
	}

	httpAddr := freeAddr(t)
	cfg := filepath.Join(dir, "hepcache.toml")
	os.WriteFile(cfg, []byte(`[origin]
default = "root://`+origin.Addr+`"
[security]
tls_cert = "`+hc+`"
tls_key = "`+hk+`"
gsi = true
ca_paths = ["`+caDir+`"]
[[security.rule]]
path = "/"
read = ["authenticated"]
`), 0o644)
	p := startProc(t, "--config", cfg, "--cache-dir", filepath.Join(dir, "cache"), "--http-listen", httpAddr)
	rootURL := "root://localhost:" + strings.TrimPrefix(p.addr, "127.0.0.1:") + "//store/f.root"
	httpsURL := "https://localhost:" + strings.TrimPrefix(httpAddr, "127.0.0.1:") + "/store/f.root"

	gsiEnv := func(who string) []string {
		return realclient.Env("XrdSecPROTOCOL=gsi", "X509_USER_PROXY="+users[who].proxy, "X509_CERT_DIR="+caDir,
			"X509_USER_CERT=/nonexistent", "X509_USER_KEY=/nonexistent", "XRD_LOGLEVEL=Info")
	}
	reads := func(t *testing.T, who, url string) (bool, string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		r := realclient.Run(t, gsiEnv(who), "xrdcp", "-f", "-N", url, out)
		got, _ := os.ReadFile(out)
		return r.Err == nil && bytes.Equal(got, want), string(r.Stdout) + string(r.Stderr)
	}
	curlCode := func(t *testing.T, who string) string {
		t.Helper()
		r := realclient.Run(t, realclient.Env(), curl, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", caPEM,
			"--cert", users[who].cert, "--key", users[who].key, httpsURL)
		if len(r.Stderr) > 0 {
			t.Logf("curl as %s: %s", who, r.Stderr)
		}
		return strings.TrimSpace(string(r.Stdout))
	}
	for _, who := range []string{"alice", "bob"} {
		if ok, out := reads(t, who, rootURL); !ok {
			t.Fatalf("%s over gsi before the revocation: %s", who, out)
		}
		if c := curlCode(t, who); c != "200" {
			t.Fatalf("%s over https before the revocation: %s", who, c)
		}
	}

	// openssl's CA revokes alice an hour ago (XRootD counts a revocation
	// from the second after its time) and writes its CRL; fetch-crl's name.
	ssl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(openssl, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	serial := strings.TrimPrefix(ssl("x509", "-serial", "-noout", "-in", users["alice"].cert), "serial=")
	if len(serial)%2 == 1 {
		serial = "0" + serial
	}
	subject := strings.TrimPrefix(ssl("x509", "-subject", "-noout", "-nameopt", "compat", "-in", users["alice"].cert), "subject=")
	asn1Time := func(t time.Time) string { return t.UTC().Format("060102150405Z") }
	os.WriteFile(filepath.Join(dir, "index.txt"), []byte("R\t"+asn1Time(time.Now().Add(24*time.Hour))+"\t"+asn1Time(time.Now().Add(-time.Hour))+"\t"+serial+"\tunknown\t"+subject+"\n"), 0o644)
	cnf := filepath.Join(dir, "ca.cnf")
	os.WriteFile(cnf, []byte("default_ca = d\n[d]\ndatabase = "+filepath.Join(dir, "index.txt")+"\ndefault_md = sha256\ndefault_crl_days = 30\n"), 0o644)
	crlFile := filepath.Join(dir, "crl.pem")
	ssl("ca", "-config", cnf, "-keyfile", caKey, "-cert", caPEM, "-gencrl", "-out", crlFile)
	if out, err := exec.Command(openssl, "verify", "-crl_check", "-CAfile", caPEM, "-CRLfile", crlFile, users["alice"].cert).CombinedOutput(); err == nil || !strings.Contains(string(out), "revoked") {
		t.Fatalf("openssl does not find alice revoked: %v\n%s", err, out)
	}
	crl, _ := os.ReadFile(crlFile)
	os.WriteFile(filepath.Join(caDir, ssl("x509", "-hash", "-noout", "-in", caPEM)+".r0"), crl, 0o644)

	p.cmd.Process.Signal(syscall.SIGHUP)
	eventually.True(t, func() bool { return strings.Count(p.log.String(), "loaded CA certificates") >= 2 }, "SIGHUP to re-read the CA files and CRLs")
	if ok, out := reads(t, "alice", rootURL); ok || !strings.Contains(out, "revoked") {
		t.Errorf("a revoked proxy read over gsi: %s", out)
	}
	if c := curlCode(t, "alice"); c != "403" {
		t.Errorf("a revoked certificate over https: %s, want 403", c)
	}
	if ok, out := reads(t, "bob", rootURL); !ok {
		t.Errorf("bob over gsi after alice's revocation: %s", out)
	}
	if c := curlCode(t, "bob"); c != "200" {
		t.Errorf("bob over https after alice's revocation: %s", c)
	}

	// The real XRootD, gsi with its default -crl:1, on the same files:
	// it finds and verifies the CRL by the same name. (It lets alice in
	// all the same: XrdCryptosslX509Crl::LoadCache stores kCE_ok into an
	// entry's time instead of its status, so that IsRevoked never finds a
	// serial, in 5.5.3 and since; hepcache refuses, as -crl means.)
	xrdtest.Chown(t, caDir, hc, hk)
	x := xrdtest.StartOrigin(t, data, func(o *xrdtest.OriginOptions) {
		o.Config = append(o.Config, "xrootd.seclib libXrdSec.so",
			"sec.protocol gsi -certdir:"+caDir+" -cert:"+hc+" -key:"+hk+" -crl:1 -gmapopt:0 -d:3",
			"sec.protbind * only gsi")
	})
	xURL := "root://localhost:" + strings.TrimPrefix(x.Addr, "127.0.0.1:") + "//store/f.root"
	if ok, out := reads(t, "bob", xURL); !ok {
		t.Errorf("XRootD 5.5.3 refused bob: %s", out)
	}
	ok, _ := reads(t, "alice", xURL)
	t.Logf("XRootD 5.5.3 with -crl:1 let the revoked proxy read: %v", ok)
	if !strings.Contains(x.Log(), "CRL successfully loaded from "+caDir) {
		t.Errorf("XRootD did not load the CRL hepcache uses:\n%s", x.Log())
	}
}
