package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/realclient"
	"github.com/hepcache/hepcache/internal/syncbuf"
	"github.com/hepcache/hepcache/internal/xrdtest"
)

// TestCheckMode: `hepcache check` (and `serve --check`) reports every
// problem of a configuration at once, each with its key, binds no port
// (the listen address is taken by the test) and sends no monitoring
// packet; a good configuration passes with exit status 0.
func TestCheckMode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hepcache.toml")
	good := `[server]
listen = "` + ln.Addr().String() + `"
[cache]
dir = "` + dir + `/cache"
[space]
max_age = "30d"
[origin]
default = "127.0.0.1:21094"
[monitor]
destination = "` + udp.LocalAddr().String() + `"
`
	os.WriteFile(cfg, []byte(good), 0o644)
	for _, args := range [][]string{{"check", "--config", cfg}, {"serve", "--check", "--config", cfg}} {
		out, err := exec.Command(hepcacheBin, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "configuration OK") {
			t.Fatalf("hepcache %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	bad := strings.Replace(good, "[space]\n", "[space]\ncapacity = \"0.5\"\nwatermarks = \"90,95\"\n", 1) +
		"[cache]\n" // a duplicate table: the file does not parse
	os.WriteFile(cfg, []byte(bad), 0o644)
	if out, err := exec.Command(hepcacheBin, "check", "--config", cfg).CombinedOutput(); err == nil {
		t.Fatalf("check accepted a file that does not parse:\n%s", out)
	}
	bad = strings.Replace(good, "[space]\n", "[space]\ncapacity = \"0.5\"\nwatermarks = \"90,95\"\n", 1)
	bad = strings.Replace(bad, "[cache]\n", "[cache]\nblock_size = \"3000\"\ndata_dirs = [\""+dir+"/d1\", \""+dir+"/d2\"]\n", 1)
	os.WriteFile(cfg, []byte(bad), 0o644)
	out, err := exec.Command(hepcacheBin, "check", "--config", cfg).CombinedOutput()
	if err == nil {
		t.Fatalf("check accepted:\n%s", out)
	}
	for _, want := range []string{"space.capacity = 1", "space.watermarks = \"90,95\"", "cache.block_size = 3000", "on one file system"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	udp.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _, err := udp.ReadFrom(make([]byte, 1500)); err == nil {
		t.Fatalf("check sent a %d-byte monitoring packet", n)
	}
}

// TestCheckAgreesWithServe (issue 29 item 4): `hepcache check` and
// `hepcache serve` share one validation: for each configuration of the
// issue, check refuses it if and only if serve does (or serve starts and
// check says OK), check's message names what serve's does; a problem the
// service user meets (here nobody: a cache directory of root's) is found
// by check run as root with --user.
func TestCheckAgreesWithServe(t *testing.T) {
	realclient.RequireRoot(t, "check and serve as nobody")
	setpriv := realclient.Require(t, "setpriv")
	// A directory nobody may cross, holding a binary nobody may run.
	top, bin := crossableTop(t, "hepcache-check-")
	origin := xrdtest.StartOrigin(t, t.TempDir())
	badCreds := filepath.Join(top, "credentials")
	os.WriteFile(badCreds, []byte("[default\naws_access_key_id\n"), 0o644)
	for _, tc := range []struct {
		name   string
		toml   string   // besides listen, cache.dir and origin.default
		origin string   // default: the test's origin
		env    []string // for both
		nobody bool     // check --user nobody, serve as nobody
		uninit bool     // a data dir never taken into service
		refuse string   // "" when both accept; else in both messages
	}{
		{name: "typo'd origin scheme", origin: "rot://127.0.0.1:1094", refuse: `unsupported scheme "rot"`},
		{name: "bare host origin", origin: "127.0.0.1", refuse: "needs a scheme"},
		{name: "uninitialised data disk", uninit: true, refuse: "hepcache disk init"},
		{name: "cache dir the service user cannot write", nobody: true, refuse: "chown -R nobody:nogroup"},
		{name: "unknown principal", toml: "[[security.rule]]\npath = \"/\"\nread = [\"wizard:merlin\"]\n", refuse: "wizard"},
		{name: "missing TLS files", toml: "[security]\ntls_cert = \"" + top + "/none.pem\"\ntls_key = \"" + top + "/none.key\"\n", refuse: "none.pem"},
		{name: "malformed shared credentials file", origin: "s3://bucket/prefix", toml: "[origin]\ns3_endpoint = \"http://127.0.0.1:9\"\n",
			env: []string{"AWS_SHARED_CREDENTIALS_FILE=" + badCreds}, refuse: badCreds},
		{name: "capacity above the file system", toml: "[space]\ncapacity = \"1P\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(top, strings.NewReplacer(" ", "-", "'", "").Replace(tc.name))
			os.MkdirAll(dir, 0o755)
			cacheDir := filepath.Join(dir, "cache")
			if tc.nobody {
				os.Mkdir(cacheDir, 0o755) // root's
			}
			o := tc.origin
			if o == "" {
				o = "root://" + origin.Addr
			}
			addr := freeAddr(t)
			body := fmt.Sprintf("[server]\nlisten = %q\n[cache]\ndir = %q\n", addr, cacheDir)
			if tc.uninit {
				body += fmt.Sprintf("data_dirs = [%q]\n", realclient.Tmpfs(t, "8m"))
			}
			body += tc.toml
			if strings.Contains(tc.toml, "[origin]") {
				body = strings.Replace(body, "[origin]\n", fmt.Sprintf("[origin]\ndefault = %q\n", o), 1)
			} else {
				body += fmt.Sprintf("[origin]\ndefault = %q\n", o)
			}
			cfg := filepath.Join(dir, "hepcache.toml")
			os.WriteFile(cfg, []byte(body), 0o644)
			env := append(os.Environ(), tc.env...)

			args := []string{"check", "--config", cfg}
			if tc.nobody {
				args = append(args, "--user", "nobody")
			}
			chk := exec.Command(bin, args...)
			chk.Env = env
			checkOut, checkErr := chk.CombinedOutput()

			serveArgs := []string{bin, "serve", "--config", cfg}
			if tc.nobody {
				serveArgs = append([]string{setpriv, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"}, serveArgs...)
			}
			srv := exec.Command(serveArgs[0], serveArgs[1:]...)
			srv.Env = env
			var serveOut syncbuf.Buffer
			srv.Stdout, srv.Stderr = &serveOut, &serveOut
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- srv.Wait() }()
			var serveErr error
			started := false
			stop := make(chan struct{})
			defer close(stop)
			select {
			case serveErr = <-exited:
			case <-listening(addr, stop):
				started = true
				srv.Process.Kill()
				<-exited
			}
			switch {
			case tc.refuse == "" && (checkErr != nil || !started):
				t.Fatalf("want both to accept: check %v\n%s\nserve started %v %v\n%s", checkErr, checkOut, started, serveErr, serveOut.String())
			case tc.refuse != "" && (checkErr == nil || started):
				t.Fatalf("want both to refuse: check %v\n%s\nserve started %v\n%s", checkErr, checkOut, started, serveOut.String())
			case tc.refuse != "" && (!strings.Contains(string(checkOut), tc.refuse) || !strings.Contains(serveOut.String(), tc.refuse)):
				t.Fatalf("want %q in both:\ncheck: %s\nserve: %s", tc.refuse, checkOut, serveOut.String())
			}
			if tc.name == "capacity above the file system" && !strings.Contains(string(checkOut), "warning: space.capacity") {
				t.Errorf("check does not warn about the capacity:\n%s", checkOut)
			}
			t.Logf("check: %s", checkOut)
		})
	}
}

// listening is closed once addr accepts connections; it stops trying
// when stop is closed.
func listening(addr string, stop <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				c.Close()
				close(ch)
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return ch
}

// TestCheckWording (issue 34 item 8): check says "left by a run as root"
// only of what hepcache makes inside its own trees, not of a cache
// directory an admin made by hand; it numbers its problems so that the
// count it gives matches what one reads (a problem may take several
// lines); a ram left to its default comes with where the figure comes from
// and how to bound it (XCache's pfc.ram is not carried over).
func TestCheckWording(t *testing.T) {
	realclient.RequireRoot(t, "check as nobody")
	top, bin := crossableTop(t, "hepcache-wording-")
	cacheDir := filepath.Join(top, "cache")
	os.Mkdir(cacheDir, 0o755) // by hand, as root
	cfg := filepath.Join(top, "hepcache.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\nlisten = %q\n[cache]\ndir = %q\n[origin]\ndefault = \"root://127.0.0.1:1094\"\n", freeAddr(t), cacheDir)), 0o644)
	check := func() string {
		out, _ := exec.Command(bin, "check", "--config", cfg, "--user", "nobody").CombinedOutput()
		return string(out)
	}
	out := check()
	if !strings.Contains(out, "chown -R nobody:nogroup "+cacheDir) || strings.Contains(out, "left by a run as root") {
		t.Errorf("a cache directory made by hand: want the chown, and no guess that a run as root left it:\n%s", out)
	}
	if !strings.Contains(out, "  1. cache.dir") || !strings.Contains(out, "1 problem in the configuration") {
		t.Errorf("the problem is not numbered, or not counted:\n%s", out)
	}
	// What hepcache makes inside its tree, root's: a run as root left it.
	os.Chown(cacheDir, 65534, 65534)
	os.Mkdir(filepath.Join(cacheDir, "meta"), 0o755)
	out = check()
	if !strings.Contains(out, filepath.Join(cacheDir, "meta")+" belongs to root:root") || !strings.Contains(out, "left by a run as root") {
		t.Errorf("a directory of the cache's tree left by root: want it named, as left by a run as root:\n%s", out)
	}
	// Several problems, the count matching the numbers.
	os.RemoveAll(filepath.Join(cacheDir, "meta"))
	os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\nlisten = %q\n[cache]\ndir = %q\nblock_size = \"3000\"\n[space]\nwatermarks = \"90,95\"\n[origin]\ndefault = \"root://127.0.0.1:1094\"\n", freeAddr(t), cacheDir)), 0o644)
	out = check()
	n := len(regexp.MustCompile(`(?m)^  \d+\. `).FindAllString(out, -1))
	if !strings.Contains(out, fmt.Sprintf("%d problems in the configuration", n)) || n < 2 {
		t.Errorf("%d numbered problems, and the count says otherwise:\n%s", n, out)
	}
	// A good configuration: ram's default explained.
	os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\nlisten = %q\n[cache]\ndir = %q\n[origin]\ndefault = \"root://127.0.0.1:1094\"\n", freeAddr(t), cacheDir)), 0o644)
	out = check()
	for _, want := range []string{"configuration OK", "pfc.ram", "MemoryMax=", `ram = "8G"`} {
		if !strings.Contains(out, want) {
			t.Errorf("check of a config with ram = \"0\" lacks %q:\n%s", want, out)
		}
	}
}
