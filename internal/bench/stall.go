package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/xrdproc"
)

// StallConfig configures `bench stall`: clients that ask for files and
// never read the answers, next to normal readers. A cache whose memory a
// stalled send holds makes the normal readers wait for it.
type StallConfig struct {
	// Dir holds the dataset and cache directories. Required.
	Dir string
	// Stalled HTTP clients ask for a file of Size each and read nothing
	// (a 4 KiB receive buffer); Normal xrdcp clients (plain kXR_read) read
	// a file of Size each, cold. Default 64 and 8, 16 MiB.
	Stalled, Normal int
	Size            int64
	// RAM is the cache's cache.ram. Default 64M (fewer blocks than the
	// stalled clients ask for).
	RAM string
	// HepcacheBin is the binary run as the cache. Default: this executable.
	HepcacheBin string
	// Smoke starts the origin and the cache and reads one small file
	// through each, measuring nothing.
	Smoke bool
	// Out receives the report, Progress the progress lines.
	Out, Progress io.Writer
}

// StallResult is one run: the normal readers' time alone and next to the
// stalled clients.
type StallResult struct {
	Alone, Stalled float64 // seconds
}

// Stall runs the benchmark and prints its report.
func Stall(ctx context.Context, cfg StallConfig) (_ *StallResult, err error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("bench stall: a work directory is required")
	}
	if cfg.Smoke {
		cfg.Stalled, cfg.Normal, cfg.Size = 1, 1, 1<<20
	}
	w := newWatch(ctx)
	ctx = w.ctx
	defer w.close()
	defer func() { err = w.result(err) }()
	if cfg.Stalled == 0 {
		cfg.Stalled = 64
	}
	if cfg.Normal == 0 {
		cfg.Normal = 8
	}
	if cfg.Size == 0 {
		cfg.Size = 16 << 20
	}
	if cfg.RAM == "" {
		cfg.RAM = "64M"
	}
	bin, err := defaultBin(cfg.HepcacheBin)
	if err != nil {
		return nil, err
	}
	cfg.HepcacheBin = bin
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	progress := progressFunc(cfg.Progress, "stall")
	data := filepath.Join(cfg.Dir, "origin")
	stalled, err := writeLoadFiles(data, "stall", cfg.Stalled, cfg.Size)
	if err != nil {
		return nil, err
	}
	normal, err := writeLoadFiles(data, "normal", 2*cfg.Normal, cfg.Size)
	if err != nil {
		return nil, err
	}
	origin, err := xrdproc.StartOrigin(data)
	if err != nil {
		return nil, err
	}
	defer origin.Remove()
	w.xrootd("origin", origin)
	if cfg.Smoke {
		sm := smoke{ctx: ctx, progress: progress, file: normal[0]}
		if err := sm.read("origin", origin.URL); err != nil {
			return nil, err
		}
		return nil, sm.caches(w, []string{"hepcache"}, func(string) (*cacheProc, error) {
			httpAddr, err := freeAddr()
			if err != nil {
				return nil, err
			}
			return startCacheProc("hepcache", cfg.HepcacheBin, filepath.Join(cfg.Dir, "cache-smoke"), origin.Addr,
				[]string{"--ram", cfg.RAM, "--http-listen", httpAddr})
		})
	}
	res := &StallResult{}
	for i, withStalled := range []bool{false, true} {
		httpAddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		cu, err := startCacheProc("hepcache", cfg.HepcacheBin, filepath.Join(cfg.Dir, fmt.Sprintf("cache-%d", i)), origin.Addr,
			[]string{"--ram", cfg.RAM, "--http-listen", httpAddr})
		if err != nil {
			return nil, err
		}
		w.cache(cu)
		var conns []net.Conn
		if withStalled {
			for _, f := range stalled {
				c, err := StallHTTP(httpAddr, f)
				if err != nil {
					cu.stop()
					return nil, err
				}
				conns = append(conns, c)
			}
			time.Sleep(2 * time.Second) // every stalled answer has filled its socket
			progress("%d stalled HTTP clients connected", len(conns))
		}
		files := normal[i*cfg.Normal : (i+1)*cfg.Normal]
		secs, err := xrdcpMode(ctx, "read", cu.url(), files)
		for _, c := range conns {
			c.Close()
		}
		cu.stop()
		if err != nil {
			return nil, err
		}
		if withStalled {
			res.Stalled = secs
		} else {
			res.Alone = secs
		}
		progress("%d normal cold readers, stalled clients %v: %.2fs", cfg.Normal, withStalled, secs)
	}
	fmt.Fprintf(cfg.Out, "\n%d cold xrdcp readers (plain kXR_read, %d MiB each) through hepcache at ram = %s: %.2f s alone, %.2f s next to %d HTTP clients that asked for %d MiB each and read nothing (%.2fx).\n",
		cfg.Normal, cfg.Size>>20, cfg.RAM, res.Alone, res.Stalled, cfg.Stalled, cfg.Size>>20, res.Stalled/res.Alone)
	fmt.Fprintln(cfg.Out, "Target: the normal readers within 1.2x of their time alone.")
	return res, nil
}

// DialTiny connects to addr with a 4 KiB receive buffer: a client whose
// kernel takes almost nothing on its behalf.
func DialTiny(addr string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}}
	return d.Dial("tcp", addr)
}

// StallHTTP asks for path over HTTP (DialTiny) and never reads the answer;
// the caller closes the connection.
func StallHTTP(addr, path string) (net.Conn, error) {
	c, err := DialTiny(addr)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
