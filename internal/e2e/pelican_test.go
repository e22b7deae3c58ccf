package e2e

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/auth/authtest"
	"github.com/hepcache/hepcache/internal/eventually"
	"github.com/hepcache/hepcache/internal/pelicantest"
	"github.com/hepcache/hepcache/internal/realclient"
)

// pelicanCurl runs curl against the cache over https trusting ca and
// returns the status, the headers and the body.
func pelicanCurl(t *testing.T, ca string, args ...string) (int, string, string) {
	t.Helper()
	bin := realclient.Require(t, "curl")
	dir := t.TempDir()
	hf, bf := filepath.Join(dir, "h"), filepath.Join(dir, "b")
	out, err := exec.Command(bin, append([]string{"-sS", "--cacert", ca, "-D", hf, "-o", bf, "-w", "%{http_code}"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %q: %v\n%s", args, err, out)
	}
	code, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	h, _ := os.ReadFile(hf)
	b, _ := os.ReadFile(bf)
	return code, string(h), string(b)
}

func headerOf(h, name string) string {
	for _, l := range strings.Split(h, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(strings.TrimSpace(k), name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestPelicanCache: `hepcache serve` with a [pelican] section joins a
// federation (the protocol double of internal/pelicantest, which checks
// what Pelican checks): it registers, advertises, and the director's
// clients read through it with real curl over https: public objects
// without a token (one origin read, then hits with Age), private ones only
// with a token of their issuer; the director's test and presence check
// and the scrape work; `hepcache pelican status` says so; no key or token
// shows in the log.
func TestPelicanCache(t *testing.T) {
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	// Larger than the read-ahead (10 blocks): the client's one-byte probe
	// cannot make the cache hold it whole before the client's GET.
	large := make([]byte, 16<<20+5)
	for i := range large {
		large[i] = byte(i*13 + i>>11)
	}
	fed := pelicantest.Start(t, pelicantest.Options{Namespaces: []pelicantest.Namespace{
		{Path: "/public", PublicRead: true, Files: map[string][]byte{"/hello.txt": []byte("hello public\n"), "/big.bin": big, "/staged.bin": big[:1<<20], "/large.bin": large}},
		{Path: "/private", Files: map[string][]byte{"/secret.txt": []byte("secret data\n")}},
	}})
	dir := t.TempDir()
	cert, key := fed.CA.Host(t, "localhost", "127.0.0.1").WriteFiles(t, dir, "hostcert")
	httpAddr := freeAddr(t)
	_, port, _ := strings.Cut(httpAddr, ":")
	dataURL := "https://localhost:" + port
	cfgFile := filepath.Join(dir, "hepcache.toml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`
[server]
http_listen = %q
[cache]
dir = %q
[log]
access_log = %q
[security]
tls_cert = %q
tls_key = %q
origin_ca_paths = [%q]
[pelican]
federation = %q
site = "hepcache-e2e"
data_url = %q
`, httpAddr, filepath.Join(dir, "cache"), filepath.Join(dir, "access.log"), cert, key, fed.CAFile, fed.URL, dataURL)), 0o644)
	p := startProc(t, "--config", cfgFile)
	eventually.True(t, func() bool { return len(fed.Ads()) > 0 }, "an advertisement")
	if errs := fed.Errors(); len(errs) > 0 {
		t.Fatalf("the double found differences from Pelican:\n%s", strings.Join(errs, "\n"))
	}
	ca := fed.CAFile

	// Public: no token; the first GET reads the origin, the second is a hit.
	for i := 0; i < 2; i++ {
		code, _, body := pelicanCurl(t, ca, dataURL+"/public/hello.txt")
		if code != 200 || body != "hello public\n" {
			t.Fatalf("GET %d of a public object: %d %q", i, code, body)
		}
	}
	code, _, body := pelicanCurl(t, ca, dataURL+"/public/big.bin")
	if code != 200 || body != string(big) {
		t.Fatalf("GET of a 3 MiB public object: %d, %d bytes", code, len(body))
	}
	if n := fed.OriginReads("/public/hello.txt"); n != 1 {
		t.Fatalf("the origin served hello.txt %d times; want once (then hits)", n)
	}
	// The cache kept the director's redirect for the open file: one
	// redirect for the object (the open), not one per block.
	if n := fed.Redirects("/public/big.bin"); n != 1 {
		t.Fatalf("the director redirected the cache %d times for a 3-block object; want once", n)
	}
	// Held: HEAD says Age and the digest; the director counts it as held.
	eventually.True(t, func() bool {
		_, h, _ := pelicanCurl(t, ca, "-I", dataURL+"/public/big.bin")
		return headerOf(h, "Age") != ""
	}, "an Age on the held object")
	_, h, _ := pelicanCurl(t, ca, "-I", "-H", "Want-Digest: crc32c", dataURL+"/public/big.bin")
	if want := fmt.Sprintf("crc32c=%08x", crc32.Checksum(big, crc32.MakeTable(crc32.Castagnoli))); headerOf(h, "Digest") != want {
		t.Fatalf("Digest %q; want %q", headerOf(h, "Digest"), want)
	}
	ctx := context.Background()
	if held, code, _, err := fed.Holds(ctx, "/public/big.bin", ""); err != nil || !held {
		t.Fatalf("the director's presence check: held %v, %d, %v", held, code, err)
	}

	// As `pelican object get` (issue 33): the first get a miss (no Age),
	// the second a hit; Server and the X-Transfer-Status trailer on both;
	// one director redirect for the object; digests of the hit, md5
	// included, from the cache's bytes without a request upstream.
	for i, wantHit := range []bool{false, true} {
		tr, err := fed.Get(ctx, "/public/large.bin", "")
		if err != nil || tr.Status != 200 || string(tr.Body) != string(large) {
			t.Fatalf("get %d: %v, %+v", i+1, err, tr.Status)
		}
		if hit := tr.Age > 0; hit != wantHit || !strings.HasPrefix(tr.Server, "hepcache/") || tr.TransferStatus != "200: OK" {
			t.Fatalf("get %d: Age %d (probe %d), Server %q, trailer %q; want hit %v", i+1, tr.Age, tr.ProbeAge, tr.Server, tr.TransferStatus, wantHit)
		}
	}
	redirects, reads := fed.Redirects("/public/large.bin"), fed.OriginReads("/public/large.bin")
	if redirects != 1 {
		t.Fatalf("the director redirected the cache %d times for a 17-block object; want once", redirects)
	}
	md := md5.Sum(large)
	_, h, _ = pelicanCurl(t, ca, "-I", "-H", "Want-Digest: md5,crc32c,crc32,sha", dataURL+"/public/large.bin")
	if d := headerOf(h, "Digest"); !strings.Contains(d, "md5="+base64.StdEncoding.EncodeToString(md[:])) || !strings.Contains(d, "sha=") || !strings.Contains(d, "crc32=") {
		t.Fatalf("Digest of the hit %q; want md5, crc32 and sha from the cache", d)
	}
	if fed.Redirects("/public/large.bin") != redirects || fed.OriginReads("/public/large.bin") != reads {
		t.Fatal("the hit's digests went upstream")
	}

	// Private: refused without a token or with a wrong one, served with one.
	if code, _, body := pelicanCurl(t, ca, dataURL+"/private/secret.txt"); code != 403 || !strings.Contains(body, "needs a bearer token") {
		t.Fatalf("a private object without a token: %d %q", code, body)
	}
	bad := authtest.NewIssuer(t, fed.IssuerURL(), 1).Sign(t, "ES256", authtest.Claims{"sub": "mallory", "scope": "storage.read:/", "aud": dataURL})
	for _, tok := range []string{bad, fed.Token("alice", "storage.read:/other", dataURL), fed.Token("alice", "storage.read:/", "https://elsewhere")} {
		if code, _, body := pelicanCurl(t, ca, "-H", "Authorization: Bearer "+tok, dataURL+"/private/secret.txt"); code != 403 {
			t.Fatalf("a private object with a bad token: %d %q", code, body)
		}
	}
	tok := fed.Token("alice", "storage.read:/", dataURL)
	if code, _, body := pelicanCurl(t, ca, "-H", "Authorization: Bearer "+tok, dataURL+"/private/secret.txt"); code != 200 || body != "secret data\n" {
		t.Fatalf("a private object with a token: %d %q", code, body)
	}
	if code, _, body := pelicanCurl(t, ca, dataURL+"/private/secret.txt?authz=Bearer%20"+tok); code != 200 || body != "secret data\n" {
		t.Fatalf("a private object with ?authz=: %d %q", code, body)
	}
	// The origin authorizes each reader: the cache passed the reader's
	// token on (the double's origin takes no other for /private).
	if n := fed.OriginReads("/private/secret.txt"); n != 1 {
		t.Fatalf("the origin served the private object %d times; want once", n)
	}
	if held, _, _, _ := fed.Holds(ctx, "/private/secret.txt", ""); held {
		t.Fatal("the presence check without a token says held for a private object")
	}

	// The Pelican client's prestage and evict calls.
	code, _, body = pelicanCurl(t, ca, dataURL+"/pelican/api/v1.0/prestage?path=/public/staged.bin")
	if code != 200 || !strings.HasSuffix(body, "success: ok\n") {
		t.Fatalf("prestage: %d %q", code, body)
	}
	if held, _, _, _ := fed.Holds(ctx, "/public/staged.bin", ""); !held {
		t.Fatal("a prestaged object is not held")
	}
	if code, _, _ := pelicanCurl(t, ca, dataURL+"/pelican/api/v1.0/evict?path=/public/staged.bin"); code != 403 {
		t.Fatalf("evict without a token: %d", code)
	}
	mod := fed.Token("alice", "storage.modify:/", dataURL)
	if code, _, body := pelicanCurl(t, ca, "-H", "Authorization: Bearer "+mod, dataURL+"/pelican/api/v1.0/evict?path=/private/secret.txt"); code != 200 || !strings.Contains(body, "Evicted 1") {
		t.Fatalf("evict with a modify token: %d %q", code, body)
	}
	if held, _, _, _ := fed.Holds(ctx, "/private/secret.txt", tok); held {
		t.Fatal("an evicted object is still held")
	}
	// The director's test, the scrape, the status command.
	if _, status, err := fed.DirectorTest(ctx); err != nil || status != "ok" {
		t.Fatalf("director test: %s %v", status, err)
	}
	if n, err := fed.Scrape(ctx); err != nil || n < 3 {
		t.Fatalf("scrape: %d %v; want the opens so far", n, err)
	}
	out, err := exec.Command(hepcacheBin, "pelican", "status", "--config", cfgFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "status:       ok") || !strings.Contains(string(out), "director test: OK") {
		t.Fatalf("pelican status: %v\n%s", err, out)
	}
	// A downtime set with the admin command takes the cache out of the
	// director's redirects, and its removal back.
	if out, err := exec.Command(hepcacheBin, "pelican", "downtime", "add", "--description", "disk swap", "--config", cfgFile).CombinedOutput(); err != nil {
		t.Fatalf("pelican downtime add: %v\n%s", err, out)
	}
	eventually.True(t, func() bool { return fed.InDowntime("/caches/hepcache-e2e") }, "the director to take the cache out")
	if _, err := fed.Get(ctx, "/public/hello.txt", ""); err == nil {
		t.Fatal("the director sent a client to a cache in downtime")
	}
	if out, err := exec.Command(hepcacheBin, "pelican", "status", "--config", cfgFile).CombinedOutput(); !strings.Contains(string(out), "downtime:     IN FORCE") {
		t.Fatalf("pelican status in downtime: %v\n%s", err, out)
	}
	if out, err := exec.Command(hepcacheBin, "pelican", "downtime", "remove", "all", "--config", cfgFile).CombinedOutput(); err != nil {
		t.Fatalf("pelican downtime remove: %v\n%s", err, out)
	}
	eventually.True(t, func() bool { return !fed.InDowntime("/caches/hepcache-e2e") }, "the director to take the cache back")
	if tr, err := fed.Get(ctx, "/public/hello.txt", ""); err != nil || string(tr.Body) != "hello public\n" {
		t.Fatalf("after the downtime: %v", err)
	}
	if errs := fed.Errors(); len(errs) > 0 {
		t.Fatalf("the double found differences from Pelican:\n%s", strings.Join(errs, "\n"))
	}

	// No secret in the log or the metrics.
	_, _, metrics := pelicanCurl(t, ca, dataURL+"/metrics")
	if !strings.Contains(metrics, "hepcache_pelican_advertising 1") {
		t.Errorf("metrics lack hepcache_pelican_advertising 1")
	}
	keyPEM, _ := os.ReadFile(filepath.Join(dir, "cache", "pelican", "issuer.pem"))
	secrets := append(fed.Tokens(), strings.Split(string(keyPEM), "\n")[1], tok, bad, mod)
	for _, s := range secrets {
		sig := s[strings.LastIndex(s, ".")+1:]
		if strings.Contains(p.log.String(), sig) || strings.Contains(metrics, sig) {
			t.Fatalf("a secret (%.12s...) shows in the log or the metrics", sig)
		}
	}
}
