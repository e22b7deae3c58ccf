// Package nginxtest runs a real nginx from Debian on loopback for tests: it
// serves one directory over HTTP, optionally with WebDAV PROPFIND (the
// dav-ext module), with its own config, pid file, temp dirs and access log,
// so tests can use a real web server as an origin and count its requests.
package nginxtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/realclient"
)

// Binary is where Debian installs nginx.
const Binary = "/usr/sbin/nginx"

// davExtModule is Debian's libnginx-mod-http-dav-ext (PROPFIND, OPTIONS).
const davExtModule = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so"

// Server is a running nginx.
type Server struct {
	// URL is the base URL, "http://127.0.0.1:PORT".
	URL string
	// Root is the directory served.
	Root string
	dir  string
	// syncN numbers the marker requests of Requests (one test goroutine).
	syncN int
}

// Options configure Start.
type Options struct {
	// WebDAV enables PROPFIND and OPTIONS (dav_ext_methods).
	WebDAV bool
	// TLSCert and TLSKey make nginx serve https:// with this certificate;
	// URL is then "https://127.0.0.1:PORT".
	TLSCert, TLSKey string
	// ServerExtra and LocationExtra are nginx directives added to the
	// server block and to its "location /" block (e.g. a check of the
	// Authorization header or of $ssl_client_s_dn).
	ServerExtra, LocationExtra string
}

// Start runs nginx serving root on a free loopback port until the test ends.
func Start(tb testing.TB, root string, opt Options) *Server {
	tb.Helper()
	if _, err := os.Stat(Binary); err != nil {
		realclient.Missing(tb, "nginx not installed: %v", err)
	}
	if opt.WebDAV {
		if _, err := os.Stat(davExtModule); err != nil {
			realclient.Missing(tb, "nginx WebDAV module (libnginx-mod-http-dav-ext) not installed: %v", err)
		}
	}
	dir := tb.TempDir()
	for _, d := range []string{"client", "proxy", "fastcgi", "uwsgi", "scgi"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o777); err != nil {
			tb.Fatal(err)
		}
	}
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		scheme := "http"
		if opt.TLSCert != "" {
			scheme = "https"
		}
		s := &Server{URL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, port), Root: root, dir: dir}
		if last = s.run(tb, port, opt); last == nil {
			return s
		}
	}
	tb.Fatalf("start nginx: %v", last)
	return nil
}

func (s *Server) run(tb testing.TB, port int, opt Options) error {
	load, dav := "", ""
	if opt.WebDAV {
		load = "load_module " + davExtModule + ";"
		dav = "dav_ext_methods PROPFIND OPTIONS;"
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	if opt.TLSCert != "" {
		listen += fmt.Sprintf(" ssl;\n        ssl_certificate %s;\n        ssl_certificate_key %s", opt.TLSCert, opt.TLSKey)
	}
	// Started as root, nginx would run its workers as nobody, who cannot
	// enter the tests' 0700 temp dirs; keep them as root (test only).
	user := ""
	if os.Geteuid() == 0 {
		user = "user root root;"
	}
	conf := fmt.Sprintf(`%s
daemon off;
master_process on;
worker_processes 1;
%[6]s
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 256; }
http {
    default_type application/octet-stream;
    log_format conn '$connection $connection_requests $request_method $status "$http_range" $request_uri';
    access_log %[2]s/access.log conn;
    client_body_temp_path %[2]s/client;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    keepalive_requests 10000;
    server {
        listen %[7]s;
        root %[4]s;
        %[8]s
        location / {
            autoindex on;
            %[5]s
            %[9]s
        }
    }
}
`, load, s.dir, port, s.Root, dav, user, listen, opt.ServerExtra, opt.LocationExtra)
	cf := filepath.Join(s.dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(Binary, "-c", cf, "-p", s.dir, "-e", filepath.Join(s.dir, "error.log"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start nginx: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(filepath.Join(s.dir, "error.log"))
			return fmt.Errorf("nginx exited (%w): %s", err, b)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("nginx did not listen on %d", port)
		}
	}
	tb.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) // SIGINT: fast shutdown
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	return nil
}

// Request is one line of nginx's access log.
type Request struct {
	// Conn is nginx's connection serial number; ConnRequests the number of
	// requests made over that connection so far.
	Conn, ConnRequests int
	Method             string
	Status             int
	Range              string
	URI                string
}

// Requests returns the requests nginx has completed so far, excluding its
// own marker requests. nginx logs a request just after sending its last
// byte, so a client may see a response before its log line exists; Requests
// first sends a marker request on a new connection and waits for its line:
// nginx's single worker has logged everything answered before it.
func (s *Server) Requests(tb testing.TB) []Request {
	tb.Helper()
	s.syncN++
	marker := fmt.Sprintf("/?hepcache-log-sync=%d", s.syncN)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(s.URL + marker)
	if err != nil {
		tb.Fatalf("nginx log marker: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		all := s.read(tb)
		for i := len(all) - 1; i >= 0; i-- {
			if all[i].URI == marker {
				out := all[:0:0]
				for _, r := range all {
					if !strings.Contains(r.URI, "hepcache-log-sync=") {
						out = append(out, r)
					}
				}
				return out
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nginx did not log the marker request %s", marker)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *Server) read(tb testing.TB) []Request {
	tb.Helper()
	f, err := os.Open(filepath.Join(s.dir, "access.log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []Request
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r Request
		line := sc.Text()
		q1 := strings.IndexByte(line, '"')
		q2 := strings.LastIndexByte(line, '"')
		if q1 < 0 || q2 <= q1 {
			continue
		}
		r.Range = line[q1+1 : q2]
		if r.Range == "-" {
			r.Range = ""
		}
		if _, err := fmt.Sscanf(line[:q1], "%d %d %s %d", &r.Conn, &r.ConnRequests, &r.Method, &r.Status); err != nil {
			continue
		}
		r.URI = strings.TrimSpace(line[q2+1:])
		out = append(out, r)
	}
	return out
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
