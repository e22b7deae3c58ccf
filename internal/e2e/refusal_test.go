package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/cache"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestRefusalReasonsReachTheClient: the reproductions. A token
// refused over roots:// (XrdCl then falls back to unix and was denied as
// "anonymous client" without the reason) now tells the client why (wrong
// audience, expired, bad signature, as the verifier knows it), as https://
// does; a valid token over plain root:// (which XrdCl does not send) is
// told to use roots://. No message carries the token.
func TestRefusalReasonsReachTheClient(t *testing.T) {
	realclient.Require(t, "xrdcp")
	realclient.Require(t, "xrdfs")
	realclient.Require(t, "curl")
	te := newTokenEnv(t, "hepcache e2e CA")
	forger := authtest.NewIssuer(t, "https://issuer.e2e.test", 1) // same name, another key
	os.WriteFile(filepath.Join(te.data, "store", "f.root"), bytes.Repeat([]byte("refusal "), 1000), 0o644)
	cfgFile := te.config(t, "", "[[security.rule]]\npath = \"/\"\nread = [\"scope\"]\n", "")
	p := startProc(t, "--config", cfgFile)
	is, caDir, httpAddr, env := te.is, te.caDir, te.httpAddr, te.env
	const aud = "https://cache.e2e.test"
	good := is.Token(t, "alice", "storage.read:/store", aud)
	past := time.Now().Add(-2 * time.Hour).Unix()
	for _, c := range []struct {
		name, tok string
		want      string // in the client's message, over roots:// and https://
	}{
		{"audience", is.Token(t, "alice", "storage.read:/store", "https://other.test"), `has audience ["https://other.test"], this cache accepts ["https://cache.e2e.test"]`},
		{"expired", is.Sign(t, "RS256", authtest.Claims{"sub": "alice", "scope": "storage.read:/store", "aud": aud, "iat": past, "nbf": past, "exp": past + 3600}), "expired at"},
		{"signature", forger.Token(t, "alice", "storage.read:/store", aud), "bad signature"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tenv := append(env, "BEARER_TOKEN="+c.tok)
			url := "roots://" + p.addr + "//store/f.root"
			for _, r := range []realclient.Result{
				realclient.Run(t, tenv, "xrdcp", "-f", "-N", url, "/dev/null"),
				realclient.Run(t, tenv, "xrdfs", "roots://"+p.addr, "stat", "/store/f.root"),
				realclient.Run(t, env, "curl", "-sS", "--cacert", filepath.Join(caDir, "caa.pem"), "-H", "Authorization: Bearer "+c.tok, "https://"+httpAddr+"/store/f.root"),
			} {
				msg := string(r.Stdout) + string(r.Stderr)
				if !strings.Contains(msg, c.want) || !strings.Contains(msg, "refused") {
					t.Errorf("%s: the client is not told %q:\n%s", r.Cmd[:5], c.want, msg)
				}
				if strings.Contains(msg, c.tok[strings.LastIndexByte(c.tok, '.'):]) {
					t.Errorf("the refusal carries the token:\n%s", msg)
				}
			}
		})
	}
	r := realclient.Run(t, append(env, "BEARER_TOKEN="+good), "xrdcp", "-f", "-N", "root://"+p.addr+"//store/f.root", "/dev/null")
	if r.Err == nil || !strings.Contains(string(r.Stderr), "[3010]") || !strings.Contains(string(r.Stderr), "roots://") {
		t.Errorf("a valid token over root:// is not told to use roots://: %s", r)
	}
	if r := realclient.Run(t, append(env, "BEARER_TOKEN="+good), "xrdcp", "-f", "-N", "roots://"+p.addr+"//store/f.root", "/dev/null"); r.Err != nil {
		t.Errorf("the valid token over roots://: %s", r)
	}
}

// TestOriginFailuresLoggedOncePerOrigin: a root:// origin that is down
// gave the client "[3012] origin unreachable" and logged nothing, while
// the same miss over HTTP logged a warning per request. Now every failure
// of an origin, whichever front end caused it, is logged once per origin
// and origin.failure_log_interval, and the clients still get the reason.
func TestOriginFailuresLoggedOncePerOrigin(t *testing.T) {
	realclient.Require(t, "xrdcp")
	realclient.Require(t, "curl")
	dir := t.TempDir()
	down := freeAddr(t) // nothing listens there
	httpAddr := freeAddr(t)
	cfgFile := filepath.Join(dir, "hepcache.toml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`[server]
http_listen = %q
[cache]
dir = %q
[origin]
default = "root://%s"
timeout = "5s"
failure_log_interval = "1h"
`, httpAddr, filepath.Join(dir, "cache"), down)), 0o644)
	p := startProc(t, "--config", cfgFile)
	for i := 0; i < 2; i++ {
		r := realclient.Run(t, realclient.Env(), "xrdcp", "-f", "-N", fmt.Sprintf("root://%s//store/f%d.root", p.addr, i), "/dev/null")
		if r.Err == nil || !strings.Contains(string(r.Stderr), "origin unreachable") {
			t.Errorf("xrdcp from a dead origin: %s", r)
		}
		r = realclient.Run(t, realclient.Env(), "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", fmt.Sprintf("http://%s/store/g%d.root", httpAddr, i))
		if string(r.Stdout) != "502" {
			t.Errorf("curl from a dead origin: %s", r)
		}
	}
	eventually.True(t, func() bool { return strings.Contains(p.log.String(), "origin failing") }, "the origin's failure logged")
	if n := strings.Count(p.log.String(), "origin failing"); n != 1 {
		t.Errorf("%d lines about the dead origin, want 1:\n%s", n, p.log.String())
	}
	if !strings.Contains(p.log.String(), "origin=root://"+down) {
		t.Errorf("the line does not name the origin:\n%s", p.log.String())
	}
	if strings.Contains(p.log.String(), "http request failed") {
		t.Errorf("the HTTP front end logged the origin failure per request:\n%s", p.log.String())
	}
}

// TestOriginWithoutChecksumsLoggedOnce: verify_checksum = "adler32" in
// front of an xrootd that computes no checksums verified nothing,
// silently; now it is said once per origin, not once per file.
func TestOriginWithoutChecksumsLoggedOnce(t *testing.T) {
	realclient.Require(t, "xrdcp")
	data := t.TempDir()
	for i := 0; i < 3; i++ {
		// Of several blocks: a file read in one request is not verified
		// with the origin (cache: wholeInOneRead).
		writeFile(t, data, fmt.Sprintf("store/c%d.root", i), 2<<20+1, uint64(i))
	}
	xcfg := filepath.Join(t.TempDir(), "origin.cfg")
	os.WriteFile(xcfg, []byte("all.export /\noss.localroot "+data+"\n"), 0o644) // no xrootd.chksum
	org := xrdtest.StartConfigFile(t, "origin", data, xcfg)
	dir := t.TempDir()
	cacheDir := filepath.Join(dir, "cache")
	cfgFile := filepath.Join(dir, "hepcache.toml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf("[cache]\ndir = %q\n[space]\nverify_checksum = \"adler32\"\n[origin]\ndefault = \"root://%s\"\n", cacheDir, org.Addr)), 0o644)
	p := startProc(t, "--config", cfgFile)
	for i := 0; i < 3; i++ {
		realclient.MustRun(t, realclient.Env(), "xrdcp", "-f", "-N", fmt.Sprintf("root://%s//store/c%d.root", p.addr, i), "/dev/null")
	}
	eventually.True(t, func() bool {
		s, err := cache.Summarize(cacheDir, 0)
		return err == nil && s.ChecksumOnly == 3
	}, "three files checked, none verified")
	if n := strings.Count(p.log.String(), "origin gave no adler32 checksum"); n != 1 {
		t.Errorf("%d lines about the origin without checksums, want 1:\n%s", n, p.log.String())
	}
}

// TestFailedPrestageNamesPlainPath: a prestage that fails at a root://
// origin reports the path as given, not with the via list the cache adds
// for loop detection (the issue: "open root://o//f.root?hc.via=vm: ...").
func TestFailedPrestageNamesPlainPath(t *testing.T) {
	data := t.TempDir()
	org := xrdtest.StartOrigin(t, data)
	cacheDir := filepath.Join(t.TempDir(), "cache")
	startProc(t, "--cache-dir", cacheDir, "--origin", "root://"+org.Addr)
	list := filepath.Join(t.TempDir(), "list")
	os.WriteFile(list, []byte("/store/missing.root\n"), 0o644)
	r := realclient.Run(t, realclient.Env(), hepcacheBin, "prestage", "--cache-dir", cacheDir, "--wait", list)
	if r.Err == nil || !strings.Contains(string(r.Stdout)+string(r.Stderr), "/store/missing.root") {
		t.Fatalf("prestage of a missing file: %s", r)
	}
	id := strings.Fields(string(r.Stdout))[0]
	r2 := realclient.Run(t, realclient.Env(), hepcacheBin, "prestage", "--cache-dir", cacheDir, "--status", id)
	for _, out := range []realclient.Result{r, r2} {
		if strings.Contains(string(out.Stdout)+string(out.Stderr), "hc.via") {
			t.Errorf("the failure shows the via list: %s", out)
		}
	}
	if !strings.Contains(string(r2.Stdout), "first error: /store/missing.root: open root://") {
		t.Errorf("prestage --status: %s", r2)
	}
}
