package e2e

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
)

// TestServeWithSecurity runs `hepcache serve` with a [security] section:
// real xrdcp reads over roots:// with a bearer token (ztn) and is refused
// without one (the monitoring f-stream names the token's user and ztn),
// curl reads over https:// with the token, and SIGHUP makes the server
// present a renewed certificate.
func TestServeWithSecurity(t *testing.T) {
	realclient.Require(t, "xrdcp")
	realclient.Require(t, "curl")
	te := newTokenEnv(t, "hepcache e2e CA")
	want := bytes.Repeat([]byte("hepcache security e2e "), 50000)
	os.WriteFile(filepath.Join(te.data, "store", "f.root"), want, 0o644)
	mon := newMonitorCollector(t)
	cfgFile := te.config(t, "require_tls = true\n", "[[security.rule]]\npath = \"/\"\nread = [\"scope\"]\n",
		"[limits]\nmax_connections = 50\nhandshake_timeout = \"5s\"\n[monitor]\nfstream = \""+mon.addr+"\"\nfstream_flush = \"1s\"\n")
	p := startProc(t, "--config", cfgFile)
	is, ca, caDir, httpAddr, env, dir := te.is, te.ca, te.caDir, te.httpAddr, te.env, te.dir

	tok := is.Token(t, "alice", "storage.read:/store", "https://cache.e2e.test")
	out := filepath.Join(dir, "out")
	if r := realclient.Run(t, append(env, "BEARER_TOKEN="+tok), "xrdcp", "-f", "-N", "roots://"+p.addr+"//store/f.root", out); r.Err != nil {
		t.Fatalf("xrdcp with a token: %s", r)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
		t.Fatal("xrdcp read wrong bytes")
	}
	eventually.True(t, func() bool {
		f := mon.Files()
		return len(f) == 1 && f[0].Closed
	}, "the token read on the f-stream")
	if f := mon.Files()[0]; f.LFN != "/store/f.root" || f.Read != int64(len(want)) || f.User.Prot != "xroot" || f.User.Name == "" ||
		!strings.HasPrefix(f.User.Info, "&p=ztn&n="+f.User.Name+"&") || !strings.Contains(f.User.Info, "&x=xrdcp&") {
		t.Errorf("f-stream of the token read: %+v", f)
	}
	if r := realclient.Run(t, env, "xrdcp", "-f", "-N", "roots://"+p.addr+"//store/f.root", out); r.Err == nil || !strings.Contains(string(r.Stdout)+string(r.Stderr), "3010") {
		t.Fatalf("xrdcp without a token: %s", r)
	}
	r := realclient.Run(t, realclient.Env(), "curl", "-sS", "-o", out, "-w", "%{http_code}", "--cacert", filepath.Join(caDir, "caa.pem"),
		"-H", "Authorization: Bearer "+tok, "https://"+httpAddr+"/store/f.root")
	if r.Err != nil || string(r.Stdout) != "200" {
		t.Fatalf("curl with a token: %s", r)
	}

	serial := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", httpAddr, &tls.Config{RootCAs: authtest.Pool(ca), ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	renewed := ca.Host(t, "localhost", "127.0.0.1")
	renewed.WriteFiles(t, dir, "hostcert")
	p.cmd.Process.Signal(syscall.SIGHUP)
	eventually.True(t, func() bool { return serial() != before }, "SIGHUP to reload the certificate")
	if got := serial(); got != renewed.Cert.SerialNumber.String() {
		t.Fatalf("after SIGHUP the server presents %s, want %s", got, renewed.Cert.SerialNumber)
	}
}
