// Package xrdproc starts real C++ XRootD servers on loopback: a plain origin
// serving a directory (StartOrigin) and an XCache 5.5.3 anchor (libXrdPss +
// libXrdPfc) in front of an origin (StartXCache), each as `xrootd -R nobody`
// on a free 127.0.0.1 port. The demo and the benchmarks use it directly;
// tests use it through package xrdtest.
package xrdproc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is a running C++ xrootd.
type Server struct {
	// Addr is "127.0.0.1:port".
	Addr string
	// Port is the listening port.
	Port int
	// URL is "root://127.0.0.1:port".
	URL string
	// Dir is the directory served (origin) or the cache directory (XCache).
	Dir string
	// ConfigPath and LogPath are the server's config file and log.
	ConfigPath string
	LogPath    string

	// CMSAddr is the cmsd manager's "127.0.0.1:port" (StartRedirector).
	CMSAddr string

	name string
	work string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	died chan struct{} // closed when it exited without Stop

	cmsd     *exec.Cmd     // the redirector's cmsd, or nil
	cmsdDone chan struct{} // closed when cmsd has exited
	ownsDir  bool          // Dir was made for the server: Remove deletes it

	mu      sync.Mutex
	stopped bool
}

// OriginOptions tune StartOrigin.
type OriginOptions struct {
	// Config holds extra configuration lines appended to the generated
	// config (e.g. "xrootd.redirect ...").
	Config []string
}

// StartOrigin starts an xrootd that exports dataDir read-only as "/", with
// adler32 checksums (`xrootd.chksum adler32`). dataDir and everything in it
// are made readable for the server user.
func StartOrigin(dataDir string, opts ...func(*OriginOptions)) (*Server, error) {
	var o OriginOptions
	for _, f := range opts {
		f(&o)
	}
	// xrootd runs in a directory of its own: a relative localroot would
	// name another place there.
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	cfg := []string{
		"all.export /",
		"oss.localroot " + dataDir,
		"xrootd.chksum adler32",
	}
	return start("origin", dataDir, append(cfg, o.Config...))
}

// XCacheOptions tune StartXCache. Zero fields take the defaults noted.
type XCacheOptions struct {
	// RAM is pfc.ram, the memory for blocks in flight (default "4g";
	// XCache refuses less than "1g").
	RAM string
	// BlockSize is pfc.blocksize (default "1m").
	BlockSize string
	// Prefetch is pfc.prefetch, blocks read ahead per file (default 10;
	// negative means 0).
	Prefetch int
	// Config holds extra configuration lines.
	Config []string
}

// StartXCache starts XRootD 5.5.3's caching proxy (libXrdPss + libXrdPfc)
// in front of the origin at originAddr ("host:port"), storing into
// cacheDir.
func StartXCache(originAddr, cacheDir string, opts XCacheOptions) (*Server, error) {
	if opts.RAM == "" {
		opts.RAM = "4g"
	}
	if opts.BlockSize == "" {
		opts.BlockSize = "1m"
	}
	switch {
	case opts.Prefetch == 0:
		opts.Prefetch = 10
	case opts.Prefetch < 0:
		opts.Prefetch = 0
	}
	cacheDir, err := filepath.Abs(cacheDir)
	if err != nil {
		return nil, err
	}
	cfg := []string{
		"all.export /",
		"ofs.osslib libXrdPss.so",
		"pss.cachelib libXrdPfc.so",
		"pss.origin " + originAddr,
		"oss.localroot " + cacheDir,
		"pfc.ram " + opts.RAM,
		"pfc.blocksize " + opts.BlockSize,
		"pfc.prefetch " + strconv.Itoa(opts.Prefetch),
	}
	return start("xcache", cacheDir, append(cfg, opts.Config...))
}

// StartConfigFile starts an xrootd on the site's own configuration file
// cfgFile (an XCache config, say), its lines following those that give it
// a free port and admin paths (inline, not by continue: a continued file
// may not continue itself); dir is the directory it writes
// (oss.localroot), made the server user's.
func StartConfigFile(kind, dir, cfgFile string) (*Server, error) {
	b, err := os.ReadFile(cfgFile)
	if err != nil {
		return nil, err
	}
	return start(kind, dir, strings.Split(strings.TrimRight(string(b), "\n"), "\n"))
}

// StartRedirector starts an XRootD redirector: an xrootd and a cmsd in the
// manager role (all.role manager) exporting "/", with the manager's waits
// shortened for tests (a node may serve one second after it logs in; the
// manager waits one second for answers to a lookup). Data servers
// subscribe at CMSAddr; clients connect to URL and are redirected. extra
// lines are appended to the configuration.
func StartRedirector(extra ...string) (*Server, error) {
	cmsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	cmsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cmsPort))
	dir, err := os.MkdirTemp("", "xrdproc-redirector-data-")
	if err != nil {
		return nil, err
	}
	cfg := append([]string{
		"all.role manager",
		"all.manager " + cmsAddr,
		"all.export /",
		"cms.delay startup 1 lookup 1 servers 1",
	}, extra...)
	s, err := start("redirector", dir, cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.CMSAddr, s.ownsDir = cmsAddr, true
	if err := s.startCmsd(); err != nil {
		s.Remove()
		return nil, err
	}
	return s, nil
}

// startCmsd starts the cmsd for s's configuration and waits until its
// port accepts connections.
func (s *Server) startCmsd() error {
	bin, err := exec.LookPath("cmsd")
	if err != nil {
		return fmt.Errorf("cmsd not installed (Debian package xrootd-server): %w", err)
	}
	cmd, out, done, err := spawn(bin, s.ConfigPath, "cmslog", s.name, s.work)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cmsd, s.cmsdDone = cmd, done
	s.mu.Unlock()
	if err := awaitListen(s.CMSAddr, done); err != nil {
		return fmt.Errorf("cmsd %w: %s\n%s", err, out.String(), s.CmsdLog())
	}
	return nil
}

// CmsdLog returns the redirector's cmsd log so far.
func (s *Server) CmsdLog() string {
	m, _ := filepath.Glob(filepath.Join(s.work, s.name, "cmslog"))
	if len(m) == 0 {
		m, _ = filepath.Glob(filepath.Join(s.work, "*", "cmslog"))
	}
	if len(m) == 0 {
		return "(no cmsd log)"
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		return fmt.Sprintf("(no cmsd log: %v)", err)
	}
	return string(b)
}

func start(kind, dir string, cfg []string) (*Server, error) {
	bin, err := exec.LookPath("xrootd")
	if err != nil {
		return nil, fmt.Errorf("xrootd not installed (Debian package xrootd-server): %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "xrdproc-"+kind+"-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(work, 0o755); err != nil {
		os.RemoveAll(work)
		return nil, err
	}
	if err := GiveToServerUser(abs, work); err != nil {
		os.RemoveAll(work)
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := launch(bin, kind, abs, work, cfg, attempt)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	os.RemoveAll(work)
	return nil, fmt.Errorf("start %s: %w", kind, lastErr)
}

func launch(bin, kind, dir, work string, cfg []string, attempt int) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s%d", kind, attempt)
	admin := filepath.Join(work, "admin")
	if err := os.MkdirAll(admin, 0o755); err != nil {
		return nil, err
	}
	lines := append([]string{
		// Only for xrootd: a cmsd reading the same file takes its port
		// from all.manager.
		"if exec xrootd",
		"xrd.port " + strconv.Itoa(port),
		"fi",
		"all.adminpath " + admin,
		"all.pidpath " + admin,
	}, cfg...)
	cfgPath := filepath.Join(work, name+".cfg")
	if err := os.WriteFile(cfgPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := GiveToServerUser(admin); err != nil {
		return nil, err
	}
	cmd, out, done, err := spawn(bin, cfgPath, "log", name, work)
	if err != nil {
		return nil, err
	}
	s := &Server{
		Addr:       net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Port:       port,
		Dir:        dir,
		ConfigPath: cfgPath,
		LogPath:    filepath.Join(work, name, "log"),
		name:       name,
		work:       work,
		cmd:        cmd,
		done:       done,
		died:       make(chan struct{}),
	}
	s.URL = "root://" + s.Addr
	go func() {
		<-done
		// Stop marks the server stopped before it kills it.
		s.mu.Lock()
		stopped := s.stopped
		s.mu.Unlock()
		if !stopped {
			close(s.died)
		}
	}()

	if err := awaitListen(s.Addr, s.done); err != nil {
		s.Stop()
		return nil, fmt.Errorf("xrootd (port %d) %w: %s\n%s", port, err, out.String(), s.Log())
	}
	return s, nil
}

// spawn starts bin (xrootd or cmsd) on the config file cfgPath as name in
// dir, logging to dir/name/logName, as nobody when run as root. done is
// closed when the process has exited; out collects what it printed.
func spawn(bin, cfgPath, logName, name, dir string) (cmd *exec.Cmd, out *bytes.Buffer, done chan struct{}, err error) {
	args := []string{"-c", cfgPath, "-l", filepath.Join(dir, logName), "-n", name}
	if os.Geteuid() == 0 {
		args = append([]string{"-R", "nobody"}, args...)
	}
	cmd = exec.Command(bin, args...)
	out = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, fmt.Errorf("%s %v: %w", bin, args, err)
	}
	done = make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	return cmd, out, done, nil
}

// awaitListen waits until addr accepts connections, the process whose
// exit closes exited ends, or 15 s pass.
func awaitListen(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited at start")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("did not accept connections on %s within 15s", addr)
		}
	}
}

// Died is closed when the server's process exits without Stop: a
// benchmark watches it to end a run against a dead server at once.
func (s *Server) Died() <-chan struct{} { return s.died }

// Log returns the server's log so far (or a note why it is unreadable).
func (s *Server) Log() string {
	b, err := os.ReadFile(s.LogPath)
	if err != nil {
		// The log location depends on -n; look for it.
		m, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(s.LogPath)), "*", "log"))
		if len(m) == 0 {
			return fmt.Sprintf("(no log: %v)", err)
		}
		if b, err = os.ReadFile(m[0]); err != nil {
			return fmt.Sprintf("(no log: %v)", err)
		}
	}
	return string(b)
}

// Stop kills the server and waits for it to exit. It is safe to call more
// than once (tests call it to simulate an origin dying mid-transfer).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	s.cmd.Process.Kill()
	<-s.done
	if s.cmsd != nil {
		s.cmsd.Process.Kill()
		<-s.cmsdDone
	}
}

// Remove stops the server and deletes its working directory (config, log).
func (s *Server) Remove() {
	s.Stop()
	os.RemoveAll(s.work)
	if s.ownsDir {
		os.RemoveAll(s.Dir)
	}
}

// PID returns the server's process id (for memory and CPU measurements).
func (s *Server) PID() int { return s.cmd.Process.Pid }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// GiveToServerUser makes the trees under dirs owned by nobody (when running
// as root, since xrootd then runs as nobody) and makes their ancestors
// traversable, so the server can read and write them.
func GiveToServerUser(dirs ...string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	const nobody = 65534
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, nobody, nobody)
		})
		if err != nil {
			return fmt.Errorf("chown %s: %w", d, err)
		}
		for p := filepath.Dir(d); p != "/" && p != "."; p = filepath.Dir(p) {
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			if fi.Mode().Perm()&0o001 == 0 {
				if err := os.Chmod(p, fi.Mode().Perm()|0o011); err != nil {
					return fmt.Errorf("chmod %s: %w", p, err)
				}
			}
		}
	}
	return nil
}
