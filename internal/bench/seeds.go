package bench

// Shared parts of the benchmarks that reproduce the seeds' experiments
// (workflow, resources, scale, layouts): the emulated sites, the caches
// under test as processes, the analysis job as a child process, statistics,
// and the Markdown/JSON/PNG output.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/bench/ttbar"
	"github.com/hepcache/hepcache/internal/sim/report"
	"github.com/hepcache/hepcache/internal/wan"
	"github.com/hepcache/hepcache/internal/xrdproc"
)

// Site is a remote storage site, emulated on loopback by a WAN link with
// the site's round-trip time in front of the origin.
type Site struct {
	Name string
	RTT  time.Duration
}

// PaperSites are the sites of seed 000's Table 1 with their measured RTTs.
func PaperSites() []Site {
	return []Site{
		{"dCache FR", 380 * time.Microsecond},
		{"KIT", 2800 * time.Microsecond},
		{"LRZ", 10300 * time.Microsecond},
		{"DESY", 20800 * time.Microsecond},
		{"BNL", 89500 * time.Microsecond},
		{"TRIUMF", 157150 * time.Microsecond},
	}
}

// ParseSites parses "NAME=RTT,..." (RTT a Go duration, e.g. "KIT=2.8ms").
func ParseSites(s string) ([]Site, error) {
	var out []Site
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, rtt, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("site %q: want NAME=RTT", f)
		}
		d, err := time.ParseDuration(rtt)
		if err != nil {
			return nil, fmt.Errorf("site %q: bad RTT: %w", f, err)
		}
		if d < 0 {
			return nil, fmt.Errorf("site %q: negative RTT", f)
		}
		out = append(out, Site{name, d})
	}
	if len(out) == 0 {
		return nil, errors.New("no sites given")
	}
	return out, nil
}

// SiteLink is a site's emulated link and the RTT measured through it.
type SiteLink struct {
	Name       string  `json:"name"`
	NominalMS  float64 `json:"rtt_nominal_ms"`
	MeasuredMS float64 `json:"rtt_measured_ms"`
	SDMS       float64 `json:"rtt_sd_ms"`
	Addr       string  `json:"-"`
	proxy      *wan.Proxy
}

// openLinks starts one WAN proxy per site in front of target and measures
// the RTT through each (10 probes).
func openLinks(ctx context.Context, sites []Site, target string, bandwidth int64, progress func(string, ...any)) ([]*SiteLink, func(), error) {
	var links []*SiteLink
	closeAll := func() {
		for _, l := range links {
			l.proxy.Close()
		}
	}
	for _, s := range sites {
		p, err := wan.New(&wan.Config{Target: target, RTT: s.RTT, Bandwidth: bandwidth})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("link to %s: %w", s.Name, err)
		}
		l := &SiteLink{Name: s.Name, NominalMS: ms(s.RTT), Addr: p.Addr().String(), proxy: p}
		links = append(links, l)
		mean, sd, err := p.MeasureRTT(ctx, 10)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("measure RTT to %s: %w", s.Name, err)
		}
		l.MeasuredMS, l.SDMS = ms(mean), ms(sd)
		progress("site %-10s nominal RTT %8.2f ms, measured %8.3f ± %.3f ms (%s)", s.Name, l.NominalMS, l.MeasuredMS, l.SDMS, l.Addr)
	}
	return links, closeAll, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cacheProc is a cache under test running as its own process.
type cacheProc struct {
	kind string // "hepcache" or "xcache"
	addr string
	pid  int
	// stop ends the process and removes its directory; halt ends the
	// process only, and restart starts it again on the same directory
	// (what it cached kept, nothing in its memory).
	stop    func()
	halt    func()
	restart func() (*cacheProc, error)
	// died is closed when the process exits without stop or halt; log
	// is the end of what it wrote (watch).
	died <-chan struct{}
	log  func() string
}

func (c *cacheProc) url() string { return "root://" + c.addr }

// cacheKinds are the caches a benchmark can run.
var cacheKinds = []string{"hepcache", "xcache"}

// startCacheProc starts a cache of kind in front of the origin at
// originAddr, storing into dir (emptied first). extra are additional
// `hepcache serve` flags.
func startCacheProc(kind, bin, dir, originAddr string, extra []string) (*cacheProc, error) {
	return startCacheProcOpts(kind, bin, dir, originAddr, extra, cacheOpts{})
}

// cacheOpts are the workflow benchmark's additions to a cache process.
type cacheOpts struct {
	// forward runs the cache in forwarding mode for XrdCl's proxy plugin
	// (no default origin; loopback origins allowed) instead of in front of
	// originAddr.
	forward bool
	// monitor, when set, is where the cache sends its f-stream, flushed
	// every fstreamFlush.
	monitor string
}

func startCacheProcOpts(kind, bin, dir, originAddr string, extra []string, o cacheOpts) (c *cacheProc, err error) {
	os.RemoveAll(dir)
	switch kind {
	case "xcache":
		return startXCacheProc(originAddr, dir, o)
	case "hepcache":
		origin := "root://" + originAddr
		if o.forward {
			origin = ""
			extra = append(slices.Clone(extra), "--forward-allow", "127.0.0.1")
		}
		if o.monitor != "" {
			cfg := dir + ".toml"
			toml := fmt.Sprintf("[monitor]\nfstream = %q\nfstream_flush = %q\n", o.monitor, fstreamFlush.String())
			if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
				return nil, err
			}
			extra = append(slices.Clone(extra), "--config", cfg)
			defer func() { // the file goes with the cache
				if c != nil {
					stop := c.stop
					c.stop = func() { stop(); os.Remove(cfg) }
				}
			}()
		}
		return startHepcacheProc(bin, dir, origin, "127.0.0.1:0", extra)
	}
	return nil, fmt.Errorf("unknown cache %q (have %s)", kind, strings.Join(cacheKinds, ", "))
}

func startXCacheProc(originAddr, dir string, o cacheOpts) (*cacheProc, error) {
	var xo xrdproc.XCacheOptions
	if o.forward {
		// pss.origin = : the origin is named in each path,
		// /root://site//path, which XCache must export.
		originAddr = "="
		xo.Config = append(xo.Config, "all.export /root:/", "all.export /xroot:/")
	}
	if o.monitor != "" {
		xo.Config = append(xo.Config, xcacheMonitorConfig(o.monitor)...)
	}
	s, err := xrdproc.StartXCache(originAddr, dir, xo)
	if err != nil {
		return nil, fmt.Errorf("start XCache: %w", err)
	}
	return &cacheProc{kind: "xcache", addr: s.Addr, pid: s.PID(), stop: func() { s.Remove(); os.RemoveAll(dir) },
		halt: s.Remove, restart: func() (*cacheProc, error) { return startXCacheProc(originAddr, dir, o) },
		died: s.Died(), log: s.Log}, nil
}

// startHepcacheProc runs `bin serve` on listen ("host:0" picks a free port)
// and waits until it accepts connections.
func startHepcacheProc(bin, dir, originURL, listen string, extra []string) (*cacheProc, error) {
	return startHepcacheProcUnder(nil, bin, dir, originURL, listen, extra)
}

// startHepcacheProcUnder is startHepcacheProc with the command run under
// wrap (e.g. prlimit --nofile=1024 --).
func startHepcacheProcUnder(wrap []string, bin, dir, originURL, listen string, extra []string) (*cacheProc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, err
	}
	if port == "0" {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		listen = l.Addr().String()
		l.Close()
	}
	args := []string{"serve", "--listen", listen, "--cache-dir", dir, "--log-level", "warn"}
	if originURL != "" { // "": forwarding mode, the origin named in each path
		args = append(args, "--origin", originURL)
	}
	args = append(args, extra...)
	cmdline := append(append(slices.Clone(wrap), bin), args...)
	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	logPath := dir + ".log"
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	done, died := make(chan struct{}), make(chan struct{})
	var halting atomic.Bool
	go func() {
		cmd.Wait()
		close(done)
		if !halting.Load() {
			close(died)
		}
	}()
	halt := func() {
		halting.Store(true)
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
	}
	stop := func() {
		halt()
		os.RemoveAll(dir)
		os.Remove(logPath)
	}
	restart := func() (*cacheProc, error) { return startHepcacheProcUnder(wrap, bin, dir, originURL, listen, extra) }
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if c, err := net.DialTimeout("tcp", listen, 100*time.Millisecond); err == nil {
			c.Close()
			return &cacheProc{kind: "hepcache", addr: listen, pid: cmd.Process.Pid, stop: stop, halt: halt, restart: restart,
				died: died, log: func() string { b, _ := os.ReadFile(logPath); return string(b) }}, nil
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			logf.Close()
			return nil, fmt.Errorf("hepcache serve exited at start: %s", bytes.TrimSpace(b))
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	return nil, fmt.Errorf("hepcache serve did not listen on %s within 20s", listen)
}

// jobOpts are the analysis job's knobs passed to every child.
type jobOpts struct {
	Work      int
	ReadAhead int
	// Hist is where the job writes its histograms ("": nowhere).
	Hist string
}

// jobResult is one analysis job as its parent saw it.
type jobResult struct {
	ttbar.Timings
	// ProcessSeconds is the child's wall time from fork to exit.
	ProcessSeconds float64 `json:"process_s"`
	// PID is the child's process id, which its XRootD login (and so the
	// servers' monitoring records) carries.
	PID int `json:"-"`
}

// runJob runs `bin bench job` on input as a child process, so that its CPU
// time is its own, and returns its timings.
func runJob(ctx context.Context, bin, input string, events int64, o jobOpts) (*jobResult, error) {
	args := []string{"bench", "job", "--input", input, "--events", strconv.FormatInt(events, 10),
		"--work", strconv.Itoa(o.Work), "--readahead", strconv.Itoa(o.ReadAhead)}
	if o.Hist != "" {
		args = append(args, "--hist", o.Hist)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	// One core, like a batch slot: CPU efficiency is then at most 100 %
	// (groot decompresses in goroutines, which on two cores would count
	// double).
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("job %s (%d events): %w: %s", input, events, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var r jobResult
	if err := json.Unmarshal(stdout.Bytes(), &r.Timings); err != nil {
		return nil, fmt.Errorf("job %s: bad JSON %q: %w", input, stdout.Bytes(), err)
	}
	r.ProcessSeconds, r.PID = wall.Seconds(), cmd.Process.Pid
	return &r, nil
}

// xrdcp returns the command copying src to dst with the real xrdcp. Its
// timeout resolution is 1 s: with XrdCl 5.5.3's default of 15 s, processes
// sometimes hang about 5 s at exit when many run at once, a client-side
// stall that would land on whichever cache was being measured.
func xrdcp(ctx context.Context, src, dst string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "xrdcp", "-s", "-f", src, dst)
	cmd.Env = append(os.Environ(), "XRD_TIMEOUTRESOLUTION=1")
	return cmd
}

// xrdcpTo copies src to dst with the real xrdcp and returns the seconds.
func xrdcpTo(ctx context.Context, src, dst string) (float64, error) {
	start := time.Now()
	out, err := xrdcp(ctx, src, dst).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("xrdcp %s %s: %w: %s", src, dst, err, bytes.TrimSpace(out))
	}
	return time.Since(start).Seconds(), nil
}

// Stat is a mean and a sample standard deviation.
type Stat struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	N    int     `json:"n"`
}

func meanSD(v []float64) Stat {
	if len(v) == 0 {
		return Stat{} // N == 0: no data (JSON has no NaN)
	}
	var s float64
	for _, x := range v {
		s += x
	}
	m := s / float64(len(v))
	var q float64
	for _, x := range v {
		q += (x - m) * (x - m)
	}
	sd := 0.0
	if len(v) > 1 {
		sd = math.Sqrt(q / float64(len(v)-1))
	}
	return Stat{Mean: m, SD: sd, N: len(v)}
}

// medianOf64 returns the median of v (0 for none).
func medianOf64(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// fmtSeconds prints a time with three significant digits, the paper's
// rounding.
func fmtSeconds(s float64) string {
	switch {
	case math.IsNaN(s):
		return "–"
	case s >= 100:
		return strconv.FormatFloat(s, 'f', 0, 64)
	case s >= 10:
		return strconv.FormatFloat(s, 'f', 1, 64)
	case s >= 1:
		return strconv.FormatFloat(s, 'f', 2, 64)
	}
	return strconv.FormatFloat(s, 'f', 3, 64)
}

func fmtStat(s Stat) string {
	if s.N == 0 || math.IsNaN(s.Mean) {
		return "–"
	}
	if s.N < 2 {
		return fmtSeconds(s.Mean)
	}
	return fmtSeconds(s.Mean) + " ± " + fmtSeconds(s.SD)
}

// mdTable renders a Markdown table.
func mdTable(w io.Writer, head []string, rows [][]string) {
	fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = "---"
		if i > 0 {
			sep[i] = "---:"
		}
	}
	fmt.Fprintln(w, "| "+strings.Join(sep, " | ")+" |")
	for _, r := range rows {
		fmt.Fprintln(w, "| "+strings.Join(r, " | ")+" |")
	}
	fmt.Fprintln(w)
}

// writeResults writes name.json, name.md and the charts into dir.
func writeResults(dir, name string, v any, md []byte, charts map[string]*report.Chart) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode %s results: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".md"), md, 0o644); err != nil {
		return err
	}
	for file, c := range charts {
		png, err := c.PNG()
		if err != nil {
			return fmt.Errorf("bench: chart %s: %w", file, err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), png, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// progressFunc returns a printf to w prefixed with the benchmark's name.
func progressFunc(w io.Writer, name string) func(string, ...any) {
	if w == nil {
		w = os.Stderr
	}
	return func(format string, args ...any) {
		fmt.Fprintf(w, "bench %s: "+format+"\n", append([]any{name}, args...)...)
	}
}

// defaultBin returns bin, or the running executable when empty.
func defaultBin(bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("bench: find the hepcache binary: %w", err)
	}
	return exe, nil
}

// needTools checks that the real XRootD tools a benchmark drives exist.
func needTools(bench string, tools ...string) error {
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("bench %s needs %s (Debian xrootd-server, xrootd-client): %w", bench, t, err)
		}
	}
	return nil
}
