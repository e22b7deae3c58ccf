// Package s3proc runs versitygw, an S3 gateway over a POSIX directory, as
// a real S3 server on loopback for tests and benchmarks, and puts objects
// into it with signed requests. versitygw is installed by .ci/run (go
// install github.com/versity/versitygw/cmd/versitygw@v1.8.0).
package s3proc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/sigv4"
)

// Version is the versitygw release the project tests against.
const Version = "v1.8.0"

// Region is the region versitygw signs for by default.
const Region = "us-east-1"

// Binary finds versitygw: $VERSITYGW, then $PATH, then the bin directory
// `go install` writes to ($GOBIN, $GOPATH/bin, ~/go/bin).
func Binary() (string, error) {
	if p := os.Getenv("VERSITYGW"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("GOPATH"); d != "" {
		dirs = append(dirs, filepath.Join(strings.Split(d, string(os.PathListSeparator))[0], "bin"))
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		dirs = append(dirs, filepath.Join(string(bytes.TrimSpace(out)), "bin"))
	}
	if h, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(h, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "versitygw")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: not on PATH nor in %v (go install github.com/versity/versitygw/cmd/versitygw@%s)", ErrNotInstalled, dirs, Version)
}

// Server is a running versitygw.
type Server struct {
	// Addr is host:port; Endpoint "http://" + Addr.
	Addr string
	// Dir is the directory it serves: one subdirectory per bucket.
	Dir string
	// AccessKey and SecretKey are its root user's credentials.
	AccessKey, SecretKey string

	bin    string
	client *http.Client

	// mu protects cmd, done and log.
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  bytes.Buffer
}

// Start runs versitygw over dir (created if missing) on a free loopback
// port with fresh root credentials and waits until it answers.
func Start(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	s := &Server{Addr: addr, Dir: dir, AccessKey: "hepcacheTestKey", SecretKey: randomSecret(), bin: bin,
		client: &http.Client{Transport: &http.Transport{Proxy: nil}}}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

func randomSecret() string {
	b := make([]byte, 20)
	if f, err := os.Open("/dev/urandom"); err == nil {
		io.ReadFull(f, b)
		f.Close()
	}
	return hex.EncodeToString(b)
}

// Endpoint is the server's base URL.
func (s *Server) Endpoint() string { return "http://" + s.Addr }

// Credentials are the root user's.
func (s *Server) Credentials() sigv4.Credentials {
	return sigv4.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}
}

func (s *Server) start() error {
	cmd := exec.Command(s.bin, "--port", s.Addr, "--keep-alive", "--quiet", "posix", s.Dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	s.mu.Lock()
	cmd.Stdout, cmd.Stderr = &lockedWriter{s}, &lockedWriter{s}
	s.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start versitygw: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("versitygw exited at start:\n%s", s.Log())
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.Stop()
	return fmt.Errorf("versitygw did not listen on %s within 30s:\n%s", s.Addr, s.Log())
}

type lockedWriter struct{ s *Server }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.s.log.Len() < 1<<20 {
		w.s.log.Write(p)
	}
	return len(p), nil
}

// Log is what versitygw printed.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Stop kills the server (an endpoint that goes down) and waits for it.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Restart starts the server again on the same address and directory.
func (s *Server) Restart() error {
	s.Stop()
	return s.start()
}

// CreateBucket creates bucket.
func (s *Server) CreateBucket(bucket string) error {
	_, err := s.call(http.MethodPut, "/"+bucket, nil, nil)
	return err
}

// Put stores data as bucket/key and returns its ETag. hdr adds headers
// (e.g. x-amz-checksum-crc32c).
func (s *Server) Put(bucket, key string, data []byte, hdr http.Header) (string, error) {
	resp, err := s.call(http.MethodPut, "/"+bucket+"/"+key, data, hdr)
	if err != nil {
		return "", err
	}
	return resp.Get("ETag"), nil
}

// MakePublic lets anyone read bucket's objects and list it (a bucket
// policy), for anonymous access.
func (s *Server) MakePublic(bucket string) error {
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*",` +
		`"Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::` + bucket + `","arn:aws:s3:::` + bucket + `/*"]}]}`
	_, err := s.call(http.MethodPut, "/"+bucket+"?policy", []byte(policy), nil)
	return err
}

// PutFile stores the file at path as bucket/key, streamed with an
// unsigned payload (large benchmark files need not be read twice).
func (s *Server) PutFile(bucket, key, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p := "/" + bucket + "/" + key
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.Endpoint(), f)
	if err != nil {
		return err
	}
	req.URL.Path, req.URL.RawPath = p, sigv4.Escape(p, false)
	req.ContentLength = fi.Size()
	if err := sigv4.Sign(req, s.Credentials(), Region, "s3", sigv4.UnsignedPayload, time.Now()); err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("PUT %s: %w", p, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("PUT %s: %s: %s", p, resp.Status, b)
	}
	return nil
}

// PID is the server process's id (CPU accounting in benchmarks).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Delete removes bucket/key.
func (s *Server) Delete(bucket, key string) error {
	_, err := s.call(http.MethodDelete, "/"+bucket+"/"+key, nil, nil)
	return err
}

// call sends one signed request and returns the answer's headers, or an
// error with the answer's body.
func (s *Server) call(method, p string, body []byte, hdr http.Header) (http.Header, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.Endpoint(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	p, q, _ := strings.Cut(p, "?")
	req.URL.Path, req.URL.RawPath, req.URL.RawQuery = p, sigv4.Escape(p, false), q
	req.ContentLength = int64(len(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	sum := sha256.Sum256(body)
	if err := sigv4.Sign(req, s.Credentials(), Region, "s3", hex.EncodeToString(sum[:]), time.Now()); err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, p, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, p, resp.Status, b)
	}
	return resp.Header, nil
}

// ErrNotInstalled wraps the Binary error for callers that treat a missing
// server specially (a benchmark row left out).
var ErrNotInstalled = errors.New("versitygw not installed")
