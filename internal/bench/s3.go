package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hepcache/hepcache/internal/procstat"
	"github.com/hepcache/hepcache/internal/s3proc"
	"github.com/hepcache/hepcache/internal/wan"
)

// The S3 origin rows of bench wan and bench throughput: versitygw (a real
// S3 server over a directory) serves the benchmark's files as objects of
// one bucket; the direct read is curl with SigV4 (one GET per object, as a
// job reading the bucket itself would), hepcache's clients read through
// it with curl (HTTP) and xrdcp (plain reads).

// s3BenchBucket is the bucket the benchmark files are uploaded to, key =
// the file's path without its leading slash.
const s3BenchBucket = "bench"

// s3Modes are how clients read through the cache with an S3 origin:
// "http" (curl against the HTTP front end) and "read" (xrdcp, plain
// kXR_read).
var s3Modes = []string{"http", "read"}

// s3Origin is a running versitygw holding the benchmark's files.
type s3Origin struct {
	srv *s3proc.Server
	// cfgFile is a hepcache config naming the key files (the endpoint
	// comes from a flag: it is the link in front of the server).
	keyDir string
}

// startS3Origin starts versitygw under dir and uploads files (paths under
// dataDir). Without versitygw it returns nil and no error, so the S3 rows
// are left out, except in CI (CI=true), where that is an error.
func startS3Origin(dir, dataDir string, files []string, progress func(string, ...any)) (*s3Origin, error) {
	if _, err := s3proc.Binary(); err != nil {
		if os.Getenv("CI") == "true" {
			return nil, err
		}
		progress("S3 origin rows left out: %v", err)
		return nil, nil
	}
	// A fresh bucket each run: objects of a previous run may differ.
	os.RemoveAll(filepath.Join(dir, "s3"))
	srv, err := s3proc.Start(filepath.Join(dir, "s3"))
	if err != nil {
		return nil, err
	}
	o := &s3Origin{srv: srv, keyDir: filepath.Join(dir, "s3-keys")}
	if err := o.setup(dataDir, files); err != nil {
		srv.Stop()
		return nil, err
	}
	progress("origin: versitygw at %s, %d objects in bucket %s", srv.Addr, len(files), s3BenchBucket)
	return o, nil
}

func (o *s3Origin) setup(dataDir string, files []string) error {
	if err := o.srv.CreateBucket(s3BenchBucket); err != nil {
		return err
	}
	for _, f := range files {
		if err := o.srv.PutFile(s3BenchBucket, strings.TrimPrefix(f, "/"), filepath.Join(dataDir, f)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(o.keyDir, 0o700); err != nil {
		return err
	}
	return errors.Join(os.WriteFile(filepath.Join(o.keyDir, "access"), []byte(o.srv.AccessKey), 0o600),
		os.WriteFile(filepath.Join(o.keyDir, "secret"), []byte(o.srv.SecretKey), 0o600))
}

func (o *s3Origin) stop() { o.srv.Stop() }

// curlDirect reads every object from the S3 endpoint (the link's address)
// with one curl each, all at once, signed with SigV4, to /dev/null, and
// returns the wall time.
func (o *s3Origin) curlDirect(ctx context.Context, endpoint string, files []string) (float64, error) {
	return curlEach(ctx, files, func(f string) *exec.Cmd {
		return exec.CommandContext(ctx, "curl", "-sS", "--fail", "-o", "/dev/null",
			"--aws-sigv4", "aws:amz:"+s3proc.Region+":s3", "--user", o.srv.AccessKey+":"+o.srv.SecretKey,
			"-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "http://"+endpoint+"/"+s3BenchBucket+f)
	})
}

// curlHTTP reads every file from a cache's HTTP front end with one curl
// each, all at once, to /dev/null, and returns the wall time.
func curlHTTP(ctx context.Context, base string, files []string) (float64, error) {
	return curlEach(ctx, files, func(f string) *exec.Cmd {
		return exec.CommandContext(ctx, "curl", "-sS", "--fail", "-o", "/dev/null", base+f)
	})
}

func curlEach(ctx context.Context, files []string, cmd func(string) *exec.Cmd) (float64, error) {
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for _, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cmd(f)
			c.Env = append(os.Environ(), "http_proxy=", "HTTP_PROXY=", "all_proxy=")
			if out, err := c.CombinedOutput(); err != nil {
				mu.Lock()
				// Never the command line: it holds the secret key.
				errs = append(errs, fmt.Sprintf("curl %s: %v: %s", f, err, out))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return 0, fmt.Errorf("%d of %d reads failed, first: %s", len(errs), len(files), errs[0])
	}
	return time.Since(start).Seconds(), nil
}

// s3Cache is a hepcache whose default origin is the bucket behind
// endpoint, with its HTTP front end on.
type s3Cache struct {
	*cacheProc
	httpBase string
}

// startCache runs hepcache with the bucket at endpoint as its origin.
func (o *s3Origin) startCache(bin, dir, endpoint string, extra []string) (*s3Cache, error) {
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(o.keyDir, filepath.Base(dir)+".toml")
	toml := fmt.Sprintf("[origin]\ns3_endpoint = %q\ns3_access_key_file = %q\ns3_secret_key_file = %q\n",
		"http://"+endpoint, filepath.Join(o.keyDir, "access"), filepath.Join(o.keyDir, "secret"))
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		return nil, err
	}
	flags := append([]string{"--config", cfg, "--http-listen", httpAddr}, extra...)
	cp, err := startHepcacheProc(bin, dir, "s3://"+s3BenchBucket, "127.0.0.1:0", flags)
	if err != nil {
		return nil, err
	}
	return &s3Cache{cacheProc: cp, httpBase: "http://" + httpAddr}, nil
}

// read reads files through the cache in mode ("http" or "read").
func (c *s3Cache) read(ctx context.Context, mode string, files []string) (float64, error) {
	if mode == "http" {
		return curlHTTP(ctx, c.httpBase, files)
	}
	return xrdcpMode(ctx, mode, c.url(), files)
}

// smokeS3 is the S3 rows' --smoke: versitygw started with files (paths
// under dataDir) as objects, one read directly (curl, SigV4) and one
// through hepcache in front of it. Without versitygw, nothing (as the
// rows are left out), except in CI.
func smokeS3(sm smoke, dir, dataDir string, files []string, bin string, flags []string) error {
	o, err := startS3Origin(dir, dataDir, files[:1], sm.progress)
	if err != nil || o == nil {
		return err
	}
	defer o.stop()
	if _, err := o.curlDirect(sm.ctx, o.srv.Addr, files[:1]); err != nil {
		return fmt.Errorf("--smoke: versitygw: %w", err)
	}
	sm.progress("smoke: versitygw at %s started and served %s", o.srv.Addr, files[0])
	c, err := o.startCache(bin, filepath.Join(dir, "cache-s3-smoke"), o.srv.Addr, flags)
	if err != nil {
		return fmt.Errorf("--smoke: start hepcache on S3: %w", err)
	}
	defer c.stop()
	if _, err := c.read(sm.ctx, "http", files[:1]); err != nil {
		return fmt.Errorf("--smoke: hepcache on S3: %w", err)
	}
	sm.progress("smoke: hepcache at %s on the bucket started and served %s", c.httpBase, files[0])
	return nil
}

// wanS3 measures the S3 rows of one cell of bench wan: the bucket behind a
// link of rtt and bw read directly by n curls, then through hepcache cold
// and hot in each of s3Modes.
func wanS3(ctx context.Context, cfg *WANConfig, o *s3Origin, rtt time.Duration, bw int64, files []string, run *int,
	progress func(string, ...any)) ([]WANRow, error) {
	link, err := wan.New(&wan.Config{Target: o.srv.Addr, RTT: rtt, Bandwidth: bw})
	if err != nil {
		return nil, err
	}
	defer link.Close()
	n := len(files)
	gib := float64(int64(n)*cfg.FileSize) / (1 << 30)
	cpu0, _ := procstat.CPU(o.srv.PID())
	direct, err := o.curlDirect(ctx, link.Addr().String(), files)
	if err != nil {
		return nil, fmt.Errorf("s3 direct: %w", err)
	}
	cpu1, _ := procstat.CPU(o.srv.PID())
	rows := []WANRow{{Read: "http", Clients: n, RTTms: ms(rtt), Bandwidth: bw, Target: "s3-direct", Cold: direct,
		CPUPerGiB: (cpu1 - cpu0).Seconds() / gib}}
	progress("rtt %v bw %d s3 direct (curl) x%d %.2fs, versitygw cpu %.2f s/GiB", rtt, bw, n, direct, rows[0].CPUPerGiB)
	for _, mode := range s3Modes {
		*run++
		c, err := o.startCache(cfg.HepcacheBin, filepath.Join(cfg.Dir, fmt.Sprintf("cache-s3-%d", *run)), link.Addr().String(), cfg.CacheFlags)
		if err != nil {
			return nil, err
		}
		cpu0, _ := procstat.CPU(c.pid)
		s := procstat.Start(c.pid, 50*time.Millisecond)
		cold, err := c.read(ctx, mode, files)
		peak, _, _ := s.Stop()
		cpu1, _ := procstat.CPU(c.pid)
		var hot float64
		if err == nil {
			hot, err = c.read(ctx, mode, files)
		}
		c.stop()
		if err != nil {
			return nil, fmt.Errorf("hepcache s3 %s x%d: %w", mode, n, err)
		}
		r := WANRow{Read: mode, Clients: n, RTTms: ms(rtt), Bandwidth: bw, Target: "hepcache-s3", Cold: cold, Hot: hot,
			ColdRatio: cold / direct, HotRatio: hot / direct, ColdVsFastest: cold / direct,
			PeakRSS: peak, CPUPerGiB: (cpu1 - cpu0).Seconds() / gib}
		rows = append(rows, r)
		progress("rtt %v bw %d s3 %s x%d hepcache cold %.2fs (%.2fx) hot %.2fs (%.2fx) rss %.0f MB cpu %.2f s/GiB",
			rtt, bw, mode, n, cold, r.ColdRatio, hot, r.HotRatio, float64(peak)/1e6, r.CPUPerGiB)
	}
	return rows, nil
}

// throughputS3 adds the S3 origin's rows to a throughput result: the
// single and parallel files as objects of versitygw on loopback, read
// directly with curl and through hepcache in each of s3Modes, cold and hot,
// median of cfg.Repeat (a fresh cache each time).
func throughputS3(ctx context.Context, cfg *ThroughputConfig, res *ThroughputResult, dataDir string, sets map[string][]string,
	progress func(string, ...any)) error {
	var all []string
	for _, name := range []string{"single", "parallel"} {
		all = append(all, sets[name]...)
	}
	o, err := startS3Origin(cfg.Dir, dataDir, all, progress)
	if err != nil || o == nil {
		return err
	}
	defer o.stop()
	res.Seconds["s3-direct"] = map[string]float64{}
	res.Seconds["hepcache-s3"] = map[string]float64{}
	res.Ratios["hepcache-s3"] = map[string]float64{}
	run := 0
	for _, name := range []string{"single", "parallel"} {
		files := sets[name]
		d, err := median(cfg.Repeat, func() (float64, error) { return o.curlDirect(ctx, o.srv.Addr, files) })
		if err != nil {
			return fmt.Errorf("s3 direct %s: %w", name, err)
		}
		res.Seconds["s3-direct"]["http:"+name] = d
		for _, mode := range s3Modes {
			var colds, hots []float64
			for i := 0; i < cfg.Repeat; i++ {
				run++
				c, err := o.startCache(cfg.HepcacheBin, filepath.Join(cfg.Dir, fmt.Sprintf("cache-s3-%d", run)), o.srv.Addr, cfg.CacheFlags)
				if err != nil {
					return err
				}
				cold, err := c.read(ctx, mode, files)
				var hot float64
				if err == nil {
					hot, err = c.read(ctx, mode, files)
				}
				c.stop()
				if err != nil {
					return fmt.Errorf("hepcache s3 %s %s: %w", mode, name, err)
				}
				colds, hots = append(colds, cold), append(hots, hot)
			}
			k := mode + ":" + name
			res.Seconds["hepcache-s3"][k+"-cold"], res.Seconds["hepcache-s3"][k+"-hot"] = medianOf(colds), medianOf(hots)
			res.Ratios["hepcache-s3"][k+"-cold"], res.Ratios["hepcache-s3"][k+"-hot"] = medianOf(colds)/d, medianOf(hots)/d
			progress("s3 %s %s: direct %.2fs, hepcache cold %.2fs, hot %.2fs", mode, name, d, medianOf(colds), medianOf(hots))
		}
	}
	return nil
}

// printThroughputS3 prints the S3 origin's rows, if measured.
func printThroughputS3(w io.Writer, r *ThroughputResult) {
	if r.Seconds["s3-direct"] == nil {
		return
	}
	fmt.Fprintln(w, "\nS3 origin (versitygw on loopback): s3-direct is one curl per file reading its object with SigV4; through hepcache with curl over HTTP (http) and plain xrdcp (read); ratios against s3-direct.")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "read\tcase\ts3-direct [s]\thepcache [s]\thepcache/s3-direct\t")
	for _, mode := range s3Modes {
		for _, c := range []string{"single-cold", "single-hot", "parallel-cold", "parallel-hot"} {
			k := mode + ":" + c
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2fx\t\n", mode, c, r.Seconds["s3-direct"]["http:"+c[:strings.Index(c, "-")]],
				r.Seconds["hepcache-s3"][k], r.Ratios["hepcache-s3"][k])
		}
	}
	tw.Flush()
}
