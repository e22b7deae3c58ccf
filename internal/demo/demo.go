// Package demo runs hepcache end to end on an embedded default: it generates
// a small dataset, serves it from a real C++ xrootd (or hepcache's own file
// origin when xrootd is not installed) behind an emulated WAN link, starts a
// cache in front of it, reads every file with the real xrdcp (or, on a
// machine without the XRootD client tools, with hepcache's own root://
// client) directly, then through the cache cold and hot, over HTTP with curl
// and with local redirects, and prints the times, the bytes that crossed the
// WAN and the bytes the cache sent each time.
package demo

import (
	"context"
	"crypto/sha256"
	"fmt"
	"github.com/hepcache/hepcache/internal/readat"
	"github.com/hepcache/hepcache/origin/posix"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/frontend/xrootd"
	"github.com/hepcache/hepcache/internal/server"
	"github.com/hepcache/hepcache/internal/wan"
	"github.com/hepcache/hepcache/internal/xrdproc"
	xrdorigin "github.com/hepcache/hepcache/origin/xrootd"
)

// Config configures a demo run.
type Config struct {
	// Dir holds the dataset, the cache and the logs. Default: a new
	// temporary directory, removed at the end.
	Dir string
	// Files and FileSize shape the dataset. Defaults 4 files of 64 MiB.
	Files    int
	FileSize int64
	// RTT and Bandwidth describe the emulated WAN link between the cache
	// (and the direct client) and the origin. Defaults 150 ms and 100 MB/s.
	RTT       time.Duration
	Bandwidth int64
	// Out receives the report. Default os.Stdout.
	Out io.Writer
	// Logger receives the server's log. Default: warnings to stderr.
	Logger *slog.Logger
}

func (c *Config) ensureDefaults() {
	if c.Files == 0 {
		c.Files = 4
	}
	if c.FileSize == 0 {
		c.FileSize = 64 << 20
	}
	if c.RTT == 0 {
		c.RTT = 150 * time.Millisecond
	}
	if c.Bandwidth == 0 {
		c.Bandwidth = 100e6
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
}

// Row is one line of the report.
type Row struct {
	Phase       string
	Seconds     float64
	OriginBytes int64
	// CacheBytes is what the cache sent to the clients (0 when they read
	// from the origin or, after a local redirect, from the cache space).
	CacheBytes int64
	MBps       float64
}

// Run runs the demo and returns its rows.
func Run(ctx context.Context, cfg Config) ([]Row, error) {
	cfg.ensureDefaults()
	read, client := readerFor(ctx)
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "hepcache-demo-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	out := cfg.Out
	dataDir := filepath.Join(cfg.Dir, "origin")
	paths, sums, err := makeDataset(dataDir, cfg.Files, cfg.FileSize)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	fmt.Fprintf(out, "dataset: %d files of %s in %s\n", cfg.Files, config.Size(cfg.FileSize), dataDir)

	originAddr, stopOrigin, kind, err := startOrigin(dataDir, cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer stopOrigin()
	fmt.Fprintf(out, "origin: %s at %s\n", kind, originAddr)

	link, err := wan.New(&wan.Config{Target: originAddr, RTT: cfg.RTT, Bandwidth: cfg.Bandwidth, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer link.Close()
	mean, sd, err := link.MeasureRTT(ctx, 10)
	if err != nil {
		return nil, fmt.Errorf("measure RTT: %w", err)
	}
	fmt.Fprintf(out, "emulated WAN: RTT %v (measured %.1f ± %.1f ms), bandwidth %.0f MB/s\n",
		cfg.RTT, float64(mean)/1e6, float64(sd)/1e6, float64(cfg.Bandwidth)/1e6)

	sc := config.Default()
	sc.Server.Listen = "127.0.0.1:0"
	sc.Server.HTTPListen = "127.0.0.1:0"
	sc.Cache.Dir = filepath.Join(cfg.Dir, "cache")
	sc.Origin.Default = "root://" + link.Addr().String()
	sc.Log.AccessLog = filepath.Join(cfg.Dir, "access.log")
	srv, err := server.New(sc, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("start cache: %w", err)
	}
	defer func() { srv.Close() }()
	cacheURL := "root://" + srv.RootAddr().String()
	httpURL := "http://" + srv.HTTPAddr().String()
	fmt.Fprintf(out, "cache: %s and %s, cache dir %s\n", cacheURL, httpURL, sc.Cache.Dir)
	fmt.Fprintf(out, "dashboard: %s/dashboard (metrics: %s/metrics, health: %s/health)\n\n", httpURL, httpURL, httpURL)

	type phase struct {
		name string
		base string
		read func(url string) ([32]byte, error)
	}
	phases := []phase{
		{"direct from origin (WAN), " + client, "root://" + link.Addr().String(), read},
		{"through cache, cold, " + client, cacheURL, read},
		{"through cache, hot, " + client, cacheURL, read},
	}
	curl, curlErr := exec.LookPath("curl")
	if curlErr == nil {
		phases = append(phases, phase{"through cache, hot, HTTP (curl)", httpURL, func(url string) ([32]byte, error) {
			return readAndSum(ctx, []string{curl, "-sS", "--fail", url})
		}})
	}
	var rows []Row
	run := func(ph phase) error {
		st := srv.Cache().Stats()
		served := func() int64 { return st.BytesHit.Load() + st.BytesMissed.Load() + st.BytesBypassed.Load() }
		before, servedBefore := link.Quiet(300*time.Millisecond), served()
		start := time.Now()
		for i, p := range paths {
			got, err := ph.read(ph.base + "/" + p)
			if err != nil {
				return fmt.Errorf("%s: %w", ph.name, err)
			}
			if got != sums[i] {
				return fmt.Errorf("%s: %s: sha256 differs from the origin's file", ph.name, p)
			}
		}
		secs := time.Since(start).Seconds()
		total := float64(cfg.Files) * float64(cfg.FileSize)
		rows = append(rows, Row{Phase: ph.name, Seconds: secs, OriginBytes: link.Stats.BytesDown.Load() - before,
			CacheBytes: served() - servedBefore, MBps: total / secs / 1e6})
		return nil
	}
	for _, ph := range phases {
		if err := run(ph); err != nil {
			return rows, err
		}
	}
	st := srv.Cache().Stats()
	misses, hits, fetched, fromDisk := st.Misses.Load(), st.Hits.Load(), st.BytesFetched.Load(), st.BytesHit.Load()

	// Seed 000's shared cache space: restart the cache with local redirects
	// (the client "mounts" the cache directory at the same path) and read
	// again: xrdcp is sent to the cached files and reads them itself.
	// hepcache's own client does not follow redirects to local files.
	var redirects int64
	if client == "xrdcp" {
		srv.Close()
		sc.Cache.LocalRedirect = filepath.Join(sc.Cache.Dir, "data")
		if srv, err = server.New(sc, cfg.Logger); err != nil {
			return rows, fmt.Errorf("restart cache with local redirect: %w", err)
		}
		if err := run(phase{"through cache, hot, local redirect, xrdcp", "root://" + srv.RootAddr().String(), read}); err != nil {
			return rows, err
		}
		redirects = srv.Cache().Stats().LocalRedirects.Load()
	}

	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "read every file\ttime [s]\tMB/s\tbytes from origin (over the WAN)\tbytes sent by the cache\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%.2f\t%.1f\t%d\t%d\t\n", r.Phase, r.Seconds, r.MBps, r.OriginBytes, r.CacheBytes)
	}
	w.Flush()
	fmt.Fprintf(out, "\ncache: %d misses, %d hits; %d bytes fetched, %d served from the cache (RAM or disk); every file sha256-verified.\n",
		misses, hits, fetched, fromDisk)
	if client == "xrdcp" {
		fmt.Fprintf(out, "local redirect (cache.local_redirect = %q): %d opens sent to the cached file, which xrdcp read itself.\n",
			sc.Cache.LocalRedirect, redirects)
	}
	if curlErr == nil {
		fmt.Fprintf(out, "one file over HTTP: curl -o file00.root %s%s\n", httpURL, paths[0])
	} else {
		fmt.Fprintf(out, "(curl not installed: no HTTP row; try %s%s in a browser while a cache runs)\n", httpURL, paths[0])
	}
	fmt.Fprintf(out, "access log: %s\n", sc.Log.AccessLog)
	return rows, nil
}

// makeDataset writes n files of size bytes with seeded random content.
func makeDataset(dir string, n int, size int64) (paths []string, sums [][32]byte, err error) {
	sub := filepath.Join(dir, "store", "demo")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return nil, nil, err
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("file%02d.root", i)
		p := filepath.Join(sub, name)
		r := rand.New(rand.NewPCG(uint64(i), 2026))
		h := sha256.New()
		f, err := os.Create(p)
		if err != nil {
			return nil, nil, err
		}
		buf := make([]byte, 1<<20)
		for left := size; left > 0; {
			k := min(int64(len(buf)), left)
			for j := 0; j < int(k); j += 8 {
				v := r.Uint64()
				for b := 0; b < 8 && j+b < int(k); b++ {
					buf[j+b] = byte(v >> (8 * b))
				}
			}
			f.Write(buf[:k])
			h.Write(buf[:k])
			left -= k
		}
		if err := f.Close(); err != nil {
			return nil, nil, err
		}
		var s [32]byte
		copy(s[:], h.Sum(nil))
		paths = append(paths, "/store/demo/"+name)
		sums = append(sums, s)
	}
	return paths, sums, nil
}

// startOrigin starts a C++ xrootd serving dir, or hepcache's own root://
// server over the directory when xrootd is not installed.
func startOrigin(dir string, log *slog.Logger) (addr string, stop func(), kind string, err error) {
	if _, lerr := exec.LookPath("xrootd"); lerr == nil {
		s, err := xrdproc.StartOrigin(dir)
		if err != nil {
			return "", nil, "", err
		}
		return s.Addr, s.Remove, "C++ xrootd (Debian xrootd-server)", nil
	}
	d, err := posix.New(dir)
	if err != nil {
		return "", nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, "", err
	}
	fe, err := xrootd.New(&xrootd.Config{Backend: backend.FromOrigin(d), Logger: log})
	if err != nil {
		ln.Close()
		return "", nil, "", err
	}
	go fe.Serve(ln)
	return ln.Addr().String(), func() { fe.Close(); d.Close() }, "hepcache's own file origin (xrootd not installed)", nil
}

// readerFor returns how the demo reads a root:// URL (returning the
// sha256): the real xrdcp when it is installed, else hepcache's own client.
func readerFor(ctx context.Context) (func(url string) ([32]byte, error), string) {
	if xrdcp, err := exec.LookPath("xrdcp"); err == nil {
		return func(url string) ([32]byte, error) { return copyAndSum(ctx, xrdcp, url) }, "xrdcp"
	}
	return func(url string) ([32]byte, error) { return clientSum(ctx, url) }, "hepcache's client (xrdcp not installed)"
}

// clientSum reads url with hepcache's own root:// client.
func clientSum(ctx context.Context, url string) ([32]byte, error) {
	var sum [32]byte
	i := strings.Index(url[len("root://"):], "/")
	if i < 0 {
		return sum, fmt.Errorf("bad URL %s", url)
	}
	base, p := url[:len("root://")+i], url[len("root://")+i:]
	o, err := xrdorigin.New(&xrdorigin.Config{URL: base})
	if err != nil {
		return sum, err
	}
	defer o.Close()
	f, err := o.Open(ctx, p)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := readat.Stream(ctx, readat.WithContext(ctx, f, 0), make([]byte, 8<<20), 0, f.Info().Size, func(p []byte) error {
		h.Write(p)
		return nil
	}); err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// copyAndSum reads url with xrdcp to stdout and returns the sha256.
func copyAndSum(ctx context.Context, xrdcp, url string) ([32]byte, error) {
	return readAndSum(ctx, []string{xrdcp, "-s", "-f", url, "-"})
}

// readAndSum runs a client that writes a file to stdout (argv) and returns
// the sha256 of what it wrote.
func readAndSum(ctx context.Context, argv []string) ([32]byte, error) {
	var sum [32]byte
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return sum, err
	}
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return sum, err
	}
	h := sha256.New()
	_, cerr := io.Copy(h, stdout)
	if err := cmd.Wait(); err != nil {
		return sum, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, stderr.String())
	}
	if cerr != nil {
		return sum, cerr
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if len(l.b) < 4096 {
		l.b = append(l.b, p[:min(len(p), 4096-len(l.b))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
