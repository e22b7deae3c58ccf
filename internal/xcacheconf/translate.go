package xcacheconf

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/units"
)

// Result is a translated configuration.
type Result struct {
	// TOML is the hepcache.toml, each key commented with the directive it
	// came from and the warnings at its top.
	TOML []byte
	// Warnings name each directive that has no equivalent or a different
	// meaning, with what to do.
	Warnings []string
	// Mapped counts the directives that became keys.
	Mapped int
	// Private: a file read (configuration, authdb, scitokens.cfg) is not
	// readable by everyone: write the result with mode 0600.
	Private bool
}

// TranslateOptions tune Translate.
type TranslateOptions struct {
	Options
	// CacheDir is cache.dir. Default: <oss.localroot>/.hepcache, on the
	// file system holding XCache's files, so that `hepcache adopt-xcache`
	// can link them.
	CacheDir string
	// Base is a hepcache.toml whose keys the translation does not set are
	// kept (the packaged /etc/hepcache/hepcache.toml that -o replaces:
	// its metrics_listen, access_log...); BaseName names it in comments.
	// Nil: none.
	Base     []byte
	BaseName string
	// AllowWider translates even where the result would let clients do
	// what the XCache configuration did not (a restriction hepcache cannot
	// carry over); without it, Translate fails with ErrWider.
	AllowWider bool
}

// ErrWider marks a translation refused because hepcache could not keep a
// restriction of the XCache configuration.
var ErrWider = errors.New("the translation would be less restrictive than the XCache configuration")

// Translate reads the XCache configuration at name and returns the
// equivalent hepcache.toml.
func Translate(name string, opt TranslateOptions) (*Result, error) {
	ds, warns, private, err := read(name, opt.Options)
	if err != nil {
		return nil, err
	}
	t := &translator{keys: map[string]*entry{}, warns: warns, cfgDir: filepath.Dir(name), gmapOpt: 1}
	for _, d := range ds {
		t.directive(d)
	}
	if err := errors.Join(t.errs...); err != nil {
		return nil, err
	}
	t.finish(opt)
	if opt.Base != nil {
		if err := t.keepBase(opt.Base, opt.BaseName); err != nil {
			return nil, err
		}
	}
	if len(t.wider) > 0 && !opt.AllowWider {
		return nil, fmt.Errorf("%w (rerun with --allow-wider to accept, after reading each):\n  - %s", ErrWider, strings.Join(t.wider, "\n  - "))
	}
	return &Result{TOML: t.render(name), Warnings: t.warns, Mapped: t.mapped, Private: private || t.private}, nil
}

// entry is one key of the output: its TOML value and why it is set.
type entry struct {
	val string
	why []string
}

type translator struct {
	keys   map[string]*entry
	order  []string
	warns  []string
	mapped int
	cfgDir string

	port, httpPort string
	httpSamePort   bool
	localroot      string
	dataSpaces     []string
	exports        []string
	forwarding     bool
	permits        []string
	authorize      bool
	// authdb is acc.authdb's file, nil without one.
	authdb *authdb
	// sciTokens is the SciTokens library's configuration, nil when
	// ofs.authlib does not load it; sciChained: loaded with ++, so that
	// the authdb decides what the tokens do not.
	sciTokens  *sciTokens
	sciChained bool
	// rules are the translated [[security.rule]] tables (finish).
	rules []authRule
	// vomsFun: gsi extracts VOMS attributes (-vomsfun); vomsDir is its
	// -vomsdir. gmapOpt is gsi's -gmapopt (default 1).
	vomsFun bool
	vomsDir string
	gmapOpt int
	// vomsAt is gsi's -vomsat; gmapFun its -gmapfun.
	vomsAt, gmapFun string
	// httpGridmap: the grid map came from http.gridmap.
	httpGridmap      bool
	gridmap          string
	gridmapRequired  bool
	allowHosts       []string
	allowLines       int      // xrd.allow directives read
	allowDropped     []string // those not carried over
	issuers          []issuer
	audiences        []string
	role, manager    string
	managerWhere     string
	gsi              bool
	requireAuthProts []string
	// errs fail the translation (an authorization file that cannot be
	// read); wider lists what would open access (see ErrWider).
	errs  []error
	wider []string
	// private: an authorization file read is not readable by everyone.
	private bool
}

func (t *translator) set(key, val string, d Directive, why string) {
	e := t.keys[key]
	if e == nil {
		e = &entry{}
		t.keys[key] = e
		t.order = append(t.order, key)
	}
	e.val = val
	c := d.Where() + " " + d.Text()
	if why != "" {
		c += ": " + why
	}
	e.why = append(e.why, c)
	t.mapped++
}

func (t *translator) warn(d Directive, format string, args ...any) {
	t.warns = append(t.warns, d.Where()+" "+d.Text()+": "+fmt.Sprintf(format, args...))
}

// widen records a restriction of d that hepcache cannot carry over: the
// translation fails unless AllowWider, and then it is a warning.
func (t *translator) widen(d Directive, format string, args ...any) {
	msg := d.Where() + " " + d.Text() + ": " + fmt.Sprintf(format, args...)
	t.wider = append(t.wider, msg)
	t.warns = append(t.warns, "LESS RESTRICTIVE: "+msg)
}

// directive maps one directive.
func (t *translator) directive(d Directive) {
	a := d.Args
	arg := func(i int) string {
		if i < len(a) {
			return a[i]
		}
		return ""
	}
	switch d.Name {
	case "xrd.port":
		t.port = arg(0)
		if _, err := strconv.Atoi(t.port); err != nil {
			t.warn(d, "not a port number; server.listen left at its default :1094")
			return
		}
		t.set("server.listen", q(":"+t.port), d, "")
	case "xrd.protocol":
		t.protocol(d)
	case "all.export":
		t.export(d)
	case "ofs.osslib":
		lib := strings.TrimPrefix(strings.Join(a, " "), "++ ")
		switch {
		case strings.Contains(lib, "XrdPss"):
			t.note(d)
		case strings.Contains(lib, "XrdOssStats"):
			t.note(d) // hepcache's /metrics
		case strings.Contains(lib, "XrdOssCsi"):
			t.note(d) // cache.block_checksums
		default:
			t.warn(d, "storage plugin without equivalent: hepcache stores its own files; ignored")
		}
	case "pss.cachelib":
		if lib := arg(0); strings.Contains(lib, "XrdPfc") || strings.Contains(lib, "XrdFileCache") || lib == "default" {
			t.note(d)
		} else {
			t.warn(d, "a cache library other than XrdPfc: ignored")
		}
	case "pss.origin":
		t.origin(d)
	case "pss.permit":
		for _, h := range a {
			if h == "/" || strings.HasPrefix(h, "-") {
				continue
			}
			t.permits = append(t.permits, strings.TrimPrefix(h, "*"))
		}
		t.mapped++
	case "pss.setopt":
		switch strings.ToLower(arg(0)) {
		case "requesttimeout":
			if s, err := strconv.Atoi(arg(1)); err == nil && s > 0 {
				t.set("origin.timeout", q((time.Duration(s) * time.Second).String()), d, "bounds one origin open or read")
			}
		case "debuglevel":
			t.note(d)
		default:
			t.warn(d, "XrdCl option without equivalent: ignored")
		}
	case "pss.config":
		t.warn(d, "hepcache pools its own connections to each origin (origin.connections, default 16): ignored")
	case "pss.namelib", "pss.ccmlib":
		t.warn(d, "name-to-name plugins do not load into hepcache: write the mapping as [[map]] rules (match/replace regular expressions, docs/hepcache.toml)")
	case "pss.dca":
		t.warn(d, "direct cache access: hepcache's equivalent is cache.local_redirect, the path under which clients mount the cache's data/ tree; set it by hand")
	case "oss.localroot":
		t.localroot = arg(0)
		t.mapped++
	case "oss.space":
		if arg(0) == "data" && arg(1) != "" {
			t.dataSpaces = append(t.dataSpaces, arg(1))
			t.mapped++
		} else {
			t.note(d)
		}
	case "pfc.spaces", "pfc.acchistorysize", "pfc.writequeue", "pfc.flush", "pfc.allow_xrdpfc_command":
		t.note(d)
	case "pfc.ram":
		// XCache's hot data lives in the kernel's page cache, which takes
		// the node's free memory; pfc.ram bounds only its blocks in
		// flight. hepcache's ram holds both and by default takes what the
		// node gives: carrying pfc.ram over would shrink its RAM cache.
		t.warn(d, "not carried over: XCache's pfc.ram bounds only its blocks in flight (its hot data lives in the page cache); hepcache's cache.ram holds both and by default takes the node's memory less a reserve (handed back under pressure). Set cache.ram to bound hepcache's memory on a node shared with other services")
	case "pfc.blocksize":
		t.blockSize(d)
	case "pfc.prefetch", "pfc.nramprefetch":
		n, err := strconv.Atoi(arg(0))
		if err != nil || n < 0 {
			t.warn(d, "not a block count: ignored")
			return
		}
		t.set("cache.prefetch", strconv.Itoa(n), d, "blocks read ahead per open file")
		if n == 0 {
			t.set("cache.prefetch_max", "0", d, "no read-ahead at all")
		}
	case "pfc.diskusage":
		t.diskusage(d)
	case "pfc.dirstats":
		for i := 0; i+1 < len(a); i++ {
			if a[i] == "maxdepth" {
				if n, err := strconv.Atoi(a[i+1]); err == nil && n >= 1 && n <= 16 {
					t.set("space.dir_stats_depth", strconv.Itoa(n), d, "per-directory statistics in /metrics")
				}
			}
		}
	case "pfc.cschk":
		switch arg(0) {
		case "off":
			t.set("cache.block_checksums", "false", d, "")
		case "cache", "net", "tls":
			t.set("cache.block_checksums", "true", d, "every block's CRC32C is recorded when fetched and checked when read back")
		}
	case "pfc.decisionlib":
		t.warn(d, "decision plugins do not load into hepcache: say what is not cached with [[namespace]] rules (action = \"passthrough\")")
	case "pfc.purgelib":
		t.warn(d, "purge plugins do not load into hepcache: purge is least recently used within [space] watermarks, [[quota]] tables share space between path prefixes, [space] pin keeps prefixes")
	case "pfc.trace", "pss.trace", "ofs.trace", "xrd.trace", "xrootd.trace", "cms.trace", "all.trace", "http.trace", "scitokens.trace", "sec.trace", "pss.debug", "oss.trace", "acc.trace":
		t.trace(d)
	case "pfc.osslib", "pfc.hdfsmode":
		t.warn(d, "no equivalent: ignored")
	case "all.adminpath", "all.pidpath":
		t.note(d) // hepcache's admin socket lives in cache.dir
	case "all.sitename":
		t.set("monitor.site", q(arg(0)), d, "the site name monitoring records carry")
	case "all.role":
		t.role = strings.Join(a, " ")
		t.mapped++
	case "all.manager":
		t.allManager(d)
	case "xrd.report":
		t.report(d)
	case "xrootd.monitor":
		t.monitor(d)
	case "xrootd.mongstream":
		t.mongstream(d)
	case "xrd.tls":
		t.set("security.tls_cert", q(arg(0)), d, "roots:// and https://")
		key := arg(1)
		if key == "" || strings.HasPrefix(key, "detail") || key == "nodetail" {
			key = arg(0)
		}
		t.set("security.tls_key", q(key), d, "")
	case "http.cert":
		t.set("security.tls_cert", q(arg(0)), d, "")
	case "http.key":
		t.set("security.tls_key", q(arg(0)), d, "")
	case "xrd.tlsca", "http.cadir", "http.cafile":
		p := arg(0)
		if d.Name == "xrd.tlsca" {
			for i := 0; i+1 < len(a); i++ {
				if a[i] == "certdir" || a[i] == "certfile" {
					p = a[i+1]
				}
			}
		}
		if strings.HasPrefix(p, "/") {
			t.set("security.ca_paths", qlist([]string{p}), d, "CAs client certificates and proxies must chain to")
			t.set("security.origin_ca_paths", qlist([]string{p}), d, "CAs of roots:// and https:// origins")
		}
	case "xrootd.tls":
		capable := false
		for _, w := range a {
			if w == "capable" {
				capable = true
			}
		}
		if !capable && (arg(0) == "all" || arg(0) == "login" || arg(0) == "session") {
			t.set("security.require_tls", "true", d, "root:// logins must switch to TLS")
		} else {
			t.note(d) // TLS-capable clients upgrade when hepcache has a certificate
		}
	case "sec.protocol":
		t.secProtocol(d)
	case "sec.protbind":
		if len(a) >= 2 && a[1] == "only" {
			t.requireAuthProts = a[2:]
		}
		t.mapped++
	case "acc.audit":
		t.audit(d)
	case "xrd.allow":
		t.allow(d)
	case "xrd.timeout":
		t.timeout(d)
	case "http.listingdeny":
		if v := strings.ToLower(arg(0)); v == "yes" || v == "true" || v == "1" {
			t.set("security.deny_http_listing", "true", d, "directory listings over HTTP are refused")
		} else {
			t.note(d)
		}
	case "http.tlsclientauth":
		if strings.ToLower(arg(0)) == "off" {
			t.set("security.http_client_auth", q("off"), d, "HTTPS does not ask for client certificates")
		} else {
			t.note(d)
		}
	case "http.gridmap":
		required := false
		for _, w := range a[1:] {
			required = required || w == "required"
		}
		t.setGridmap(d, arg(0), required)
		t.httpGridmap = true
	case "acc.authrefresh":
		t.warn(d, "XCache re-reads its authdb by itself; hepcache applies edited [[security.rule]] tables (and issuers, grid map, allow_hosts) on SIGHUP or `hepcache reload`: after changing the authdb, translate it again and reload")
	case "xrootd.seclib", "ofs.authorize", "acc.gidlifetime", "acc.gidretran", "acc.pgo":
		if d.Name == "ofs.authorize" {
			t.authorize = arg(0) != "0"
		}
		t.note(d)
	case "acc.authdb":
		t.private = t.private || notWorldReadable(t.rel(arg(0)))
		db, err := readAuthdb(t.rel(arg(0)))
		if err != nil {
			t.errs = append(t.errs, fmt.Errorf("%s %s: %w", d.Where(), d.Text(), err))
			return
		}
		for _, w := range db.wider {
			t.widen(d, "%s", w)
		}
		t.authdb = db
		t.authorize = true
		t.mapped++
	case "ofs.authlib":
		t.authlib(d)
	case "xrootd.chksum":
		t.warn(d, "hepcache answers adler32 and crc32c checksum queries from the cache itself (others from the origin); to compare completed files with the origin's, set space.verify_checksum")
	case "xrootd.fslib":
		if strings.Contains(strings.Join(a, " "), "throttle") {
			t.note(d)
		} else {
			t.warn(d, "file system plugins do not load into hepcache: ignored")
		}
	case "throttle.throttle":
		t.warn(d, "no throttle: hepcache bounds clients with [limits] (max_connections, max_requests_per_connection); ignored")
	case "xrootd.prep":
		t.warn(d, "hepcache stages files itself ([prestage] workers): ignored")
	case "ofs.tpc", "http.exthandler", "xrootd.redirect", "ofs.persist", "http.secxtractor":
		t.warn(d, "no equivalent: ignored")
	case "xrd.network", "xrd.sched", "xrd.maxfd", "xrd.buffers", "xrootd.async",
		"http.header2cgi", "http.staticpreload", "http.desthttps",
		"http.selfhttps2http", "oss.defaults", "oss.memfile", "oss.alloc", "oss.spacescan",
		"ofs.notify", "ofs.forward", "xrd.adminpath", "oss.xfr", "ofs.ckslib":
		t.note(d)
	default:
		if strings.HasPrefix(d.Name, "cms.") {
			t.note(d) // the cmsd's own settings
			return
		}
		t.warn(d, "no hepcache equivalent: ignored")
	}
}

// note counts a directive hepcache needs no key for.
func (t *translator) note(Directive) { t.mapped++ }

func (t *translator) rel(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(t.cfgDir, p)
}

// protocol maps xrd.protocol: http (XrdHttp) gets a listener of its own.
func (t *translator) protocol(d Directive) {
	if len(d.Args) == 0 {
		return
	}
	name, port, _ := strings.Cut(d.Args[0], ":")
	lib := strings.Join(d.Args[1:], " ")
	if !strings.EqualFold(name, "XrdHttp") && !strings.EqualFold(name, "http") && !strings.Contains(lib, "XrdHttp") {
		t.warn(d, "protocol without equivalent: ignored")
		return
	}
	t.mapped++
	t.httpPort = port
	t.httpSamePort = port == "" || port == "any"
}

func (t *translator) export(d Directive) {
	if len(d.Args) == 0 {
		return
	}
	p := d.Args[0]
	switch {
	case p == "/" || p == "*":
		t.exports = append(t.exports, "/")
	case strings.HasSuffix(p, ":/"):
		// /root:/, /http:/ ... exports forwarding-mode URLs.
		t.note(d)
		return
	case strings.HasPrefix(p, "/"):
		t.exports = append(t.exports, p)
	default:
		t.warn(d, "not a path: ignored")
		return
	}
	t.mapped++
}

func (t *translator) origin(d Directive) {
	a := d.Args
	if len(a) == 0 {
		return
	}
	o := a[0]
	if strings.HasPrefix(o, "=") {
		t.forwarding = true
		t.mapped++
		return
	}
	if !strings.Contains(o, "://") {
		host, port := o, "1094"
		if len(a) > 1 {
			port = a[1]
		} else if h, p, err := net.SplitHostPort(o); err == nil {
			host, port = h, p
		}
		o = "root://" + net.JoinHostPort(strings.TrimSuffix(host, "+"), port)
	}
	t.set("origin.default", q(o), d, "where misses are read from")
}

func (t *translator) size(d Directive, key, why string) {
	if len(d.Args) == 0 {
		return
	}
	s, err := units.ParseSize(d.Args[0])
	if err != nil {
		t.warn(d, "%v: ignored", err)
		return
	}
	t.set(key, q(s.String()), d, why)
}

func (t *translator) blockSize(d Directive) {
	if len(d.Args) == 0 {
		return
	}
	s, err := units.ParseSize(d.Args[0])
	if err != nil || s < 4096 {
		t.warn(d, "not a block size: ignored")
		return
	}
	s = (s + 4095) / 4096 * 4096
	t.set("cache.block_size", q(s.String()), d, "the unit of caching; adopted XCache files keep their blocks exactly when the sizes match")
	if s < 128<<10 || s%(128<<10) != 0 {
		t.set("cache.piece_size", q(units.Size(gcd(int64(s), 128<<10)).String()), d, "the stream-through unit must divide the block")
	}
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// diskusage maps "pfc.diskusage low high [files base nominal max]
// [purgeinterval T] [purgecoldfiles AGE PERIOD]".
func (t *translator) diskusage(d Directive) {
	a := d.Args
	if len(a) < 2 {
		t.warn(d, "needs low and high: ignored")
		return
	}
	lo, hi := wm(a[0]), wm(a[1])
	if lo == "" || hi == "" {
		t.warn(d, "watermarks not understood: ignored")
		return
	}
	t.set("space.watermarks", q(lo+","+hi), d, "purge least recently used files from high down to low")
	for i := 2; i < len(a); i++ {
		switch a[i] {
		case "files":
			if i+3 < len(a) {
				base, nom, max := wm(a[i+1]), wm(a[i+2]), wm(a[i+3])
				if base != "" && nom != "" && max != "" && !strings.Contains(max, ".") {
					t.set("space.capacity", q(max), d, "XCache's 'files' maximum: the space cached files may take")
					t.set("space.watermarks", q(base+","+nom), d, "XCache's 'files' baseline and nominal")
					t.warn(d, "XCache purges on both the disk's usage and the files' usage; hepcache on one: the files' (capacity %s, watermarks %s,%s); the disk watermarks %s,%s are not used", max, base, nom, lo, hi)
				} else {
					t.warn(d, "files limits not understood: ignored")
				}
				i += 3
			}
		case "purgeinterval", "sleep":
			if i+1 < len(a) {
				if dur, ok := xrdDuration(a[i+1]); ok {
					t.set("space.purge_interval", q(dur.String()), d, "hepcache also purges as soon as a write crosses the high watermark")
				}
				i++
			}
		case "purgecoldfiles":
			if i+1 < len(a) {
				if dur, ok := xrdDuration(a[i+1]); ok {
					t.set("space.max_age", q(dur.String()), d, "files untouched this long are evicted")
				}
				i += 2
			}
		}
	}
}

// wm renders an XCache watermark: a fraction stays one, a size ("500g")
// becomes hepcache's ("500G").
func wm(s string) string {
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 && f <= 1 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	if sz, err := units.ParseSize(s); err == nil && sz > 1 {
		return sz.String()
	}
	return ""
}

// xrdDuration reads XRootD's times: seconds, or a number with s, m, h or d.
func xrdDuration(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	mult := time.Second
	switch s[len(s)-1] {
	case 's':
		s = s[:len(s)-1]
	case 'm':
		mult, s = time.Minute, s[:len(s)-1]
	case 'h':
		mult, s = time.Hour, s[:len(s)-1]
	case 'd':
		mult, s = 24*time.Hour, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(n) * mult, true
}

func (t *translator) trace(d Directive) {
	lvl := ""
	for _, w := range d.Args {
		switch strings.TrimPrefix(strings.ToLower(w), "-") {
		case "all", "debug", "dump", "info+":
			lvl = "debug"
		}
	}
	if d.Name == "pss.debug" {
		lvl = "debug"
	}
	if lvl != "" {
		t.set("log.level", q(lvl), d, "")
		return
	}
	t.note(d)
}

// allManager maps all.manager [meta|all|any] host[+][:port] [port].
func (t *translator) allManager(d Directive) {
	a := d.Args
	if len(a) > 0 && (a[0] == "meta" || a[0] == "all" || a[0] == "any" || a[0] == "peer" || a[0] == "proxy") {
		a = a[1:]
	}
	if len(a) == 0 {
		return
	}
	host, port := strings.TrimSuffix(a[0], "+"), "1213"
	if len(a) > 1 {
		port = a[1]
	} else if h, p, err := net.SplitHostPort(a[0]); err == nil {
		host, port = strings.TrimSuffix(h, "+"), p
	}
	if t.manager != "" {
		t.manager += ","
	}
	t.manager += net.JoinHostPort(host, port)
	t.managerWhere = d.Where() + " " + d.Text()
	t.mapped++
}

func (t *translator) report(d Directive) {
	if len(d.Args) == 0 {
		return
	}
	dests := strings.Split(d.Args[0], ",")
	t.set("monitor.summary", q(dests[0]), d, "the summary report (XML over UDP)")
	if len(dests) > 1 {
		t.warn(d, "hepcache sends the summary to one collector: %s kept", dests[0])
	}
	for i := 1; i+1 < len(d.Args); i++ {
		if d.Args[i] == "every" {
			if dur, ok := xrdDuration(d.Args[i+1]); ok {
				t.set("monitor.summary_interval", q(dur.String()), d, "")
			}
		}
	}
}

var monEvents = map[string]bool{"all": true, "files": true, "fstat": true, "info": true, "io": true, "iov": true, "ccm": true, "pfc": true, "redir": true, "tcpmon": true, "throttle": true, "user": true, "auth": true}

// monitor maps xrootd.monitor: each "dest EVENTS host:port"; f-stream
// events to monitor.fstream, pfc to monitor.gstream.
func (t *translator) monitor(d Directive) {
	a := d.Args
	for i := 0; i < len(a); i++ {
		switch a[i] {
		case "fstat":
			// fstat T [lfn] [ops] [ssq] [xfr N]: records every T, a
			// transfer record every N of them.
			if i+1 < len(a) {
				if dur, ok := xrdDuration(a[i+1]); ok {
					t.set("monitor.fstream_flush", q(dur.String()), d, "f-stream records wait at most this long")
					for j := i + 2; j+1 < len(a) && (a[j] == "lfn" || a[j] == "ops" || a[j] == "ssq" || a[j] == "xfr"); j++ {
						if a[j] == "xfr" {
							if n, err := strconv.Atoi(a[j+1]); err == nil && n > 0 {
								t.set("monitor.xfr_interval", q((dur * time.Duration(n)).String()), d, "a transfer record of each open file this often")
							}
						}
					}
				}
				i++
			}
		case "ident":
			if i+1 < len(a) {
				if dur, ok := xrdDuration(a[i+1]); ok {
					t.set("monitor.ident_interval", q(dur.String()), d, "server identification records")
				}
				i++
			}
		case "window":
			if i+1 < len(a) {
				t.warn(d, "window %s: hepcache's records carry their own times; no window: ignored", a[i+1])
				i++
			}
		case "mbuff", "rbuff", "rnums":
			i++ // buffer sizes and redirect streams: nothing to translate
		case "flush":
			if i+1 < len(a) && a[i+1] == "io" {
				i++
			}
			if i+1 < len(a) {
				if dur, ok := xrdDuration(a[i+1]); ok {
					t.set("monitor.fstream_flush", q(dur.String()), d, "")
				}
				i++
			}
		case "dest":
			var ev []string
			j := i + 1
			for ; j < len(a) && monEvents[a[j]]; j++ {
				ev = append(ev, a[j])
			}
			if j >= len(a) {
				return
			}
			dest := a[j]
			i = j
			for _, e := range ev {
				switch e {
				case "files", "fstat", "info", "user", "io", "iov":
					if _, ok := t.keys["monitor.fstream"]; !ok {
						t.set("monitor.fstream", q(dest), d, "the f-stream (opens, transfers, closes, user mapping)")
					}
				case "pfc":
					if _, ok := t.keys["monitor.gstream"]; !ok {
						t.set("monitor.gstream", q(dest), d, "the cache g-stream")
					}
				}
			}
		}
	}
}

func (t *translator) mongstream(d Directive) {
	a := d.Args
	if len(a) == 0 || a[0] != "pfc" {
		t.note(d)
		return
	}
	dest := a[len(a)-1]
	t.set("monitor.gstream", q(dest), d, "the cache g-stream")
	for _, w := range a {
		if w == "json" {
			t.set("monitor.gstream_header", q("json"), d, "")
		}
	}
}

func (t *translator) secProtocol(d Directive) {
	a := d.Args
	if len(a) > 0 && strings.HasPrefix(a[0], "/") {
		a = a[1:] // a library path
	}
	if len(a) == 0 {
		return
	}
	switch a[0] {
	case "ztn":
		t.note(d) // tokens over root:// (ztn) are accepted with [[security.issuer]] tables
	case "gsi":
		t.gsi = true
		t.set("security.gsi", "true", d, "X.509 proxies over root://")
		for _, o := range a[1:] {
			k, v, _ := strings.Cut(strings.TrimPrefix(o, "-"), ":")
			switch k {
			case "certdir":
				t.set("security.ca_paths", qlist([]string{v}), d, "")
			case "cert":
				t.set("security.gsi_cert", q(v), d, "")
			case "key":
				t.set("security.gsi_key", q(v), d, "")
			case "vomsdir":
				t.vomsDir = v
				t.mapped++
			case "vomsfun":
				// The VOMS extraction plugin (libXrdVoms): without it
				// XCache's gsi clients have no VO, groups or role.
				t.vomsFun = true
				t.mapped++
			case "gridmap":
				t.setGridmap(d, v, false)
			case "gmapopt":
				t.gmapOpt = gmapOption(v)
				t.mapped++
				if t.gmapOpt >= 10 {
					t.warn(d, "-gmapopt:%s names a certificate the grid map does not name by its DN: hepcache's user: principals are grid-map names (dn: names DNs); authdb u lines naming DNs are not carried", v)
				}
			case "crl":
				t.gsiCRL(d, v)
			case "crldir":
				t.set("security.crl_dirs", qlist(strings.Split(v, ",")), d, "where the CRL files are")
			case "crlext":
				if v != ".r0" {
					t.widen(d, "-crlext:%s: hepcache reads CRL files named *.r0 only; rename them (fetch-crl writes .r0) and drop the option", v)
				}
			case "crlrefresh":
				if n, err := strconv.Atoi(v); err == nil && n > 0 {
					t.set("security.crl_refresh", q((time.Duration(n) * time.Second).String()), d, "CRL files are read again this often")
				}
			case "dlgpxy":
				if v != "0" && v != "ignore" {
					t.widen(d, "-dlgpxy:%s: XCache asks clients for a delegated proxy, with which it may read from the origin as the client; hepcache reads with its own credential (origin_cert), so what the origin refuses a client would be read for it", v)
				}
			case "vomsat":
				t.vomsAt = v
				t.mapped++
			case "authzfun":
				t.widen(d, "-authzfun:%s: an authorization plugin refusing proxies does not load into hepcache: what it refused is not refused", v)
			case "gmapfun":
				t.gmapFun = v
				t.mapped++
			case "ca":
				if v == "0" || v == "noverify" {
					t.warn(d, "-ca:%s: XCache does not verify the CA certificates; hepcache always verifies client certificates against security.ca_paths (stricter)", v)
				} else {
					t.note(d)
				}
			case "cipher", "md":
				t.warn(d, "-%s: hepcache's gsi uses AES-128-CBC and SHA-256 as XRootD 5's clients do; clients limited to others cannot authenticate (stricter)", k)
			case "d", "c", "exppxy", "authzpxy", "authzcall", "authzto", "authzfunparms", "gmapto", "gmapfunparms", "vomsfunparms", "moninfo", "defaulthash", "trustdns":
				t.note(d) // logging, crypto module, plugin parameters, caches: no effect on who may read
			default:
				t.warn(d, "option %s: unknown to XrdSecgsi 5.5.3 (it ignores it): ignored", k)
			}
		}
	default:
		t.warn(d, "hepcache does not speak %s: clients without a token or a proxy are anonymous", a[0])
	}
}

func (t *translator) authlib(d Directive) {
	a := d.Args
	if len(a) > 0 && a[0] == "++" {
		a = a[1:]
	}
	if len(a) == 0 {
		return
	}
	switch {
	case strings.Contains(a[0], "SciTokens"):
		cfg := "/etc/xrootd/scitokens.cfg"
		for _, p := range a[1:] {
			if v, ok := strings.CutPrefix(p, "config="); ok {
				cfg = v
			}
		}
		t.private = t.private || notWorldReadable(t.rel(cfg))
		st, err := readSciTokens(t.rel(cfg))
		if err != nil {
			t.errs = append(t.errs, fmt.Errorf("%s %s: %w", d.Where(), d.Text(), err))
			return
		}
		t.sciTokens, t.sciChained = st, len(d.Args) > 0 && d.Args[0] == "++"
		t.audiences = append(t.audiences, st.audiences...)
		t.issuers = append(t.issuers, st.issuers...)
		t.authorize = true
		t.mapped++
	case strings.Contains(a[0], "Macaroons"):
		t.warn(d, "macaroons are not accepted: clients need WLCG/SciTokens or X.509")
	default:
		t.widen(d, "authorization plugins do not load into hepcache: what it refused is not refused; write [[security.rule]] tables")
	}
}

// besideXCache is where hepcache keeps its files for XCache's directory
// dir: on dir's file system (adoption links files, never copies), but in
// a directory XCache's user cannot write, which could otherwise swap it
// for a link during adoption or later (disk.OpenTrusted refuses that):
// beside dir when dir's parent is root's and on the same file system,
// else inside dir, which must then be given to root.
func besideXCache(dir string) (string, string) {
	parent := filepath.Dir(dir)
	var st, pst syscall.Stat_t
	if syscall.Stat(dir, &st) == nil && syscall.Stat(parent, &pst) == nil &&
		st.Dev == pst.Dev && pst.Uid == 0 && pst.Mode&0o022 == 0 && parent != dir {
		return filepath.Join(parent, "hepcache"), "beside, on the file system"
	}
	return filepath.Join(dir, ".hepcache"), "inside (its own file system; before serving, give " + dir + " to root: chown root: " + dir + ", or XCache's user could swap it and hepcache refuses it), on the file system"
}

// finish sets the keys that depend on several directives.
func (t *translator) finish(opt TranslateOptions) {
	// cache.dir on the file system of XCache's files, for adopt-xcache.
	switch {
	case opt.CacheDir != "":
		t.setDerived("cache.dir", q(opt.CacheDir), "given on the command line")
	case t.localroot != "":
		d, why := besideXCache(t.localroot)
		t.setDerived("cache.dir", q(d), why+" of XCache's oss.localroot "+t.localroot+", so `hepcache adopt-xcache "+t.localroot+"` can link its files instead of copying them")
	default:
		t.warns = append(t.warns, "no oss.localroot: set cache.dir")
	}
	if len(t.dataSpaces) > 0 {
		var dirs []string
		var whys []string
		for _, s := range t.dataSpaces {
			d, why := besideXCache(s)
			dirs = append(dirs, d)
			whys = append(whys, why+" of "+s)
		}
		t.setDerived("cache.data_dirs", qlist(dirs), "one per oss.space data directory (each its own disk): "+strings.Join(whys, "; "))
	}
	if t.httpPort != "" || t.httpSamePort {
		if t.httpSamePort || t.httpPort == t.port || (t.port == "" && t.httpPort == "1094") {
			t.warns = append(t.warns, "XrdHttp shares the root:// port; hepcache serves HTTP on a port of its own: set server.http_listen (e.g. \":8443\") and point HTTP clients there")
		} else {
			t.setDerived("server.http_listen", q(":"+t.httpPort), "xrd.protocol XrdHttp:"+t.httpPort)
		}
	}
	if t.forwarding {
		if len(t.permits) > 0 {
			t.setDerived("origin.forward_allow", qlist(t.permits), "pss.origin = (forwarding mode) with pss.permit")
		} else {
			t.warns = append(t.warns, "pss.origin = (forwarding mode) without pss.permit: XCache forwards to any host, hepcache never does; list the sites clients may name in origin.forward_allow (host, host:port or .domain)")
		}
	}
	if t.manager != "" {
		if strings.Contains(t.role, "manager") || strings.Contains(t.role, "supervisor") {
			t.warns = append(t.warns, "all.role "+t.role+": a redirector; keep running the C++ xrootd/cmsd redirector and subscribe hepcache nodes to it with cmsd.manager")
		} else {
			t.setDerived("cmsd.manager", q(t.manager), t.managerWhere+": subscribe to the redirector's cmsd as a data server")
		}
	}
	if len(t.requireAuthProts) > 0 {
		strong, spoken := true, false
		for _, p := range t.requireAuthProts {
			if p == "none" || p == "unix" || p == "host" {
				strong = false
			}
			spoken = spoken || p == "gsi" && t.gsi || p == "ztn" && len(t.issuers) > 0
		}
		switch {
		case strong && spoken:
			t.setDerived("security.require_auth", "true", "sec.protbind * only "+strings.Join(t.requireAuthProts, " "))
		case strong:
			t.widen(Directive{File: "sec.protbind", Name: "sec.protbind", Args: append([]string{"*", "only"}, t.requireAuthProts...)},
				"XCache admits only clients authenticated with %s, which hepcache does not speak: they would be anonymous here", strings.Join(t.requireAuthProts, " "))
		}
	}
	if _, mon := t.keys["monitor.summary"]; (mon || t.keys["monitor.fstream"] != nil) && opt.Instance != "" && opt.Instance != "anon" {
		t.setDerived("monitor.instance", q(opt.Instance), "--instance: the name (xrootd -n) the monitoring records carry")
	}
	if t.gsi {
		t.gsiIdentities()
	}
	if t.gridmap != "" {
		t.setDerived("security.gridmap", q(t.gridmap), "http.gridmap / sec.protocol gsi -gridmap: names certificates for user:NAME")
		if t.gridmapRequired {
			t.setDerived("security.gridmap_required", "true", "certificates the grid map does not name are refused")
		}
	}
	if t.authdb != nil && len(t.authdb.users) > 0 && t.gridmap == "" {
		t.warns = append(t.warns, fmt.Sprintf("acc.authdb grants users %s: as user:NAME principals they match certificates a grid map names; no grid map was configured, so they match no one (set security.gridmap)", strings.Join(t.authdb.users, ", ")))
	}
	switch {
	case len(t.allowHosts) > 0:
		t.setDerived("security.allow_hosts", qlist(t.allowHosts), "xrd.allow: only these clients may connect")
	case t.allowLines > 0:
		msg := "xrd.allow: none of its entries could be carried over (" + strings.Join(t.allowDropped, "; ") + "): with none, every host may connect to hepcache; list them in security.allow_hosts"
		t.wider = append(t.wider, msg)
		t.warns = append(t.warns, "LESS RESTRICTIVE: "+msg)
	}
	// Tokens: issuers and audiences.
	var auds []string
	for _, a := range t.audiences {
		auds = appendNew(auds, a)
	}
	if len(auds) > 0 {
		t.setDerived("security.audiences", qlist(auds), "scitokens.cfg audience")
	}
	var kept []issuer
	for _, is := range t.issuers {
		switch {
		case is.issuer == "":
			t.warns = append(t.warns, fmt.Sprintf("scitokens.cfg [Issuer %s] has no issuer: skipped (as XRootD does)", is.name))
			continue
		case len(is.basePaths) == 0:
			t.warns = append(t.warns, fmt.Sprintf("scitokens.cfg [Issuer %s] has no base_path: skipped (as XRootD does: its tokens are refused)", is.name))
			continue
		}
		if len(is.basePaths) > 1 && len(is.restrictedPaths) > 0 {
			t.warns = append(t.warns, fmt.Sprintf("scitokens.cfg [Issuer %s]: restricted_path with several base paths: bounded relative to the first", is.name))
		}
		if len(is.extra) > 0 {
			t.warns = append(t.warns, fmt.Sprintf("scitokens.cfg [Issuer %s]: %s not mapped (hepcache maps token subjects and groups itself, docs/security.md)", is.name, strings.Join(is.extra, ", ")))
		}
		if is.strategy != "" {
			t.warns = append(t.warns, fmt.Sprintf("scitokens.cfg [Issuer %s]: authorization_strategy = %s translated as XRootD 5.7 and later define it (scopes grant only with capability; groups count only with group; mapping names a local user, which hepcache's rules do not use); XRootD 5.5 and 5.6 ignore the key and authorize with scopes and groups", is.name, is.strategy))
		}
		if is.groupsClaim != "" && is.groupsClaim != "wlcg.groups" {
			t.warns = append(t.warns, fmt.Sprintf("scitokens.cfg [Issuer %s]: groups_claim = %s: hepcache reads groups from wlcg.groups only; this issuer's groups are ignored", is.name, is.groupsClaim))
		}
		kept = append(kept, is)
	}
	t.issuers = kept
	t.authRules()
}

// authRules translates the exports, the authdb and the SciTokens
// configuration into t.rules, each deciding as XCache decided.
//
// Without authorization every exported path is readable by anyone. With
// it, XRootD asks the SciTokens library first when it is loaded: a token
// whose scope grants the request is allowed; otherwise its "onmissing"
// decides: passthrough asks the authdb when the library was chained to it
// (ofs.authlib ++), and refuses otherwise; allow allows; deny refuses
// (XrdSciTokensAccess.cc, 5.5.3). Either way a path outside every export
// has no rule, which refuses it once any rule exists; an export covers the
// paths that start with it, as XRootD compares them (XrdOucPList).
func (t *translator) authRules() {
	exports := t.exports
	onlyRoot := len(exports) == 0 || (len(exports) == 1 && exports[0] == "/")
	if onlyRoot {
		exports = []string{"/"}
	}
	if !t.authorize {
		if !onlyRoot {
			for _, e := range exports {
				t.rules = append(t.rules, authRule{path: e, read: []string{"anonymous"}})
			}
		}
		return
	}
	db := &authdb{}
	scopes := false
	paths := append([]string(nil), exports...)
	if st := t.sciTokens; st != nil {
		for _, is := range t.issuers {
			scopes = scopes || is.uses("capability")
			paths = append(paths, is.basePaths...)
		}
		switch {
		case st.onMissing == "allow":
			// Every request the tokens do not grant is allowed.
			db.ids = []identity{{principal: "anonymous", what: "onmissing = allow", caps: []capability{{path: "/", pos: privAll}}}}
			t.warns = append(t.warns, "scitokens.cfg onmissing = allow: XCache lets every client read, with or without a token; so does this translation (security.authorize is not set)")
			t.authorize = false
		case st.onMissing == "passthrough" && t.sciChained && t.authdb != nil:
			db = t.authdb
		case t.authdb != nil:
			t.warns = append(t.warns, fmt.Sprintf("acc.authdb: not consulted by XCache (the SciTokens library is loaded without ++, or with onmissing = %s): only tokens' scopes grant, here as there", st.onMissing))
		}
	} else if t.authdb != nil {
		db = t.authdb
	}
	widen := func(msg string) {
		t.wider = appendNew(t.wider, msg)
		t.warns = appendNew(t.warns, "LESS RESTRICTIVE: "+msg)
	}
	narrow := func(msg string) { t.warns = appendNew(t.warns, msg) }
	for _, r := range db.rules(paths, widen, narrow) {
		exported := false
		for _, e := range exports {
			exported = exported || strings.HasPrefix(r.path, e)
		}
		if !exported {
			continue
		}
		if scopes {
			r.read = append(r.read, "scope")
		}
		if len(r.read) == 0 {
			r.read, r.deny = []string{"none"}, nil
		}
		t.rules = append(t.rules, r)
	}
	if t.authorize {
		t.setDerived("security.authorize", "true", "ofs.authorize: requests are authorized; check refuses rules that open everything")
	}
	if len(t.rules) == 0 {
		// XCache with authorization and no grant refuses everything.
		t.rules = []authRule{{path: "/", read: []string{"none"}}}
		t.warns = append(t.warns, "ofs.authorize without readable grants: nobody may read (as XCache); write the [[security.rule]] tables for who may")
	}
}

// gsiIdentities decides which identities of gsi clients hepcache may use
// to match XCache's: VOMS attributes only where XCache extracted them
// (-vomsfun), grid-map names only where it mapped them (-gmapopt).
func (t *translator) gsiIdentities() {
	switch {
	case t.vomsFun && (t.vomsAt == "2" || t.vomsAt == "require"):
		t.setDerived("security.voms_required", "true", "sec.protocol gsi -vomsat:require: a proxy without VOMS attributes is refused")
	case !t.vomsFun && t.vomsAt != "":
		t.warns = append(t.warns, "sec.protocol gsi -vomsat:"+t.vomsAt+" without -vomsfun: XrdSecgsi 5.5.3 extracts no VOMS attributes without the plugin, so the option has no effect there; nor here")
	}
	if t.gmapFun != "" {
		if t.gmapOpt%10 == 2 {
			t.wider = append(t.wider, "sec.protocol gsi -gmapfun:"+t.gmapFun+" with -gmapopt:2: a proxy the plugin does not map is refused by XCache; the plugin does not load into hepcache")
			t.warns = append(t.warns, "LESS RESTRICTIVE: sec.protocol gsi -gmapfun:"+t.gmapFun+": a mapping plugin does not load into hepcache")
		} else {
			t.warns = append(t.warns, "sec.protocol gsi -gmapfun:"+t.gmapFun+": a mapping plugin does not load into hepcache: only the grid map names certificates")
		}
	}
	if t.gmapOpt%10 == 2 {
		t.gridmapRequired = true
		if t.gridmap == "" {
			t.gridmap = defaultGridmap
		}
	}
	switch {
	case t.vomsFun:
		dir := t.vomsDir
		if dir == "" {
			dir = "/etc/grid-security/vomsdir"
		}
		t.setDerived("security.vomsdir", q(dir), "sec.protocol gsi -vomsfun: VOMS attributes (o, g and r lines of the authdb) come from verified attribute certificates")
	case t.vomsDir != "":
		t.warns = append(t.warns, "sec.protocol gsi -vomsdir without -vomsfun: XCache extracts no VOMS attributes, so they authorize nothing there: security.vomsdir is not set, and hepcache ignores them too")
	}
	switch {
	case t.gmapOpt%10 == 0:
		if t.gridmap != "" && !t.httpGridmap {
			t.warns = append(t.warns, fmt.Sprintf("sec.protocol gsi -gmapopt:%d: the grid map is not used, so user names match no certificate; security.gridmap not set", t.gmapOpt))
			t.gridmap = ""
		}
	case t.gridmap == "":
		// gsi uses the default grid map when it exists (-gmapopt:1).
		if _, err := os.Stat(defaultGridmap); err == nil {
			t.gridmap = defaultGridmap
		}
	}
}

// gsiCRL carries gsi's -crl:N (a number or XRootD's name for it).
func (t *translator) gsiCRL(d Directive, v string) {
	n, err := strconv.Atoi(v)
	if err != nil {
		n = map[string]int{"ignore": 0, "try": 1, "use": 2, "use,updt": 12, "require": 3, "require,updt": 13}[v]
	}
	if n >= 10 {
		t.warn(d, "-crl:%s also downloads a missing CRL from the URL of its CA; hepcache reads the CRL files only (keep fetch-crl running)", v)
		n %= 10
	}
	name := []string{"ignore", "try", "use", "require"}[max(0, min(n, 3))]
	t.set("security.crl", q(name), d, "revocation lists checked as XrdSecgsi's -crl:"+strconv.Itoa(n)+", for https client certificates as well")
}

// gmapOption reads gsi's -gmapopt (a number or XRootD's names for them).
func gmapOption(v string) int {
	switch v {
	case "nomap":
		return 0
	case "trymap":
		return 1
	case "usemap":
		return 2
	case "nomap,usedn":
		return 10
	case "trymap,usedn":
		return 11
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 1
	}
	return n
}

// defaultGridmap is the grid map gsi reads without -gridmap.
const defaultGridmap = "/etc/grid-security/grid-mapfile"

// pathUnder reports whether p is dir or below it.
func pathUnder(dir, p string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// setGridmap records a grid map (http.gridmap, gsi -gridmap); hepcache has
// one for both protocols.
func (t *translator) setGridmap(d Directive, file string, required bool) {
	if file == "" {
		t.warn(d, "no grid-mapfile named: ignored")
		return
	}
	if t.gridmap != "" && t.gridmap != file {
		t.warn(d, "hepcache has one grid map for HTTPS and gsi: %s kept; merge the two files", t.gridmap)
	} else {
		t.gridmap = file
	}
	t.gridmapRequired = t.gridmapRequired || required
	t.mapped++
}

// allow maps xrd.allow {host PATTERN | netgroup NAME}. An entry hepcache
// cannot carry refuses the clients it named (stricter); only when no entry
// is left would every host be let in (finish widens then).
func (t *translator) allow(d Directive) {
	t.allowLines++
	if len(d.Args) < 2 || d.Args[0] != "host" || config.CheckHostPattern(d.Args[1]) != nil {
		t.allowDropped = append(t.allowDropped, d.Where()+" "+d.Text())
	}
	if len(d.Args) < 2 {
		t.warn(d, "not understood (xrd.allow host PATTERN): the clients it meant are refused")
		return
	}
	switch d.Args[0] {
	case "host":
		h := d.Args[1]
		if err := config.CheckHostPattern(h); err != nil {
			t.warn(d, "host pattern %q not carried over (%v): the clients it names are refused", h, err)
			return
		}
		t.allowHosts = appendNew(t.allowHosts, h)
		t.mapped++
	default:
		t.warn(d, "hepcache allows clients by address, host name or pattern, not by %s (netgroups are not resolved): its clients are refused; list their hosts in security.allow_hosts", d.Args[0])
	}
}

// audit maps acc.audit {none | deny | grant}...: hepcache logs every denial
// ("authz: denied"); grants are in the access log.
func (t *translator) audit(d Directive) {
	for _, w := range d.Args {
		if w == "grant" {
			t.warn(d, "granted requests are recorded in hepcache's access log: set log.access_log")
			return
		}
	}
	t.note(d) // denials are always logged
}

// timeout maps xrd.timeout [hail T] [idle T] [kill T] [read T].
func (t *translator) timeout(d Directive) {
	a := d.Args
	for i := 0; i+1 < len(a); i += 2 {
		dur, ok := xrdDuration(a[i+1])
		switch {
		case !ok:
			t.warn(d, "%s %s: not a time: ignored", a[i], a[i+1])
		case a[i] == "idle":
			t.set("limits.idle_timeout", q(dur.String()), d, "root:// connections without open files close after this")
		case a[i] == "hail":
			t.set("limits.handshake_timeout", q(dur.String()), d, "connect-to-login bound")
		default:
			t.warn(d, "%s: no equivalent in hepcache: ignored", a[i])
		}
	}
}

func (t *translator) setDerived(key, val, why string) {
	e := t.keys[key]
	if e == nil {
		e = &entry{}
		t.keys[key] = e
		t.order = append(t.order, key)
	}
	e.val = val
	e.why = append(e.why, why)
}

// sections in the order hepcache's docs/hepcache.toml has them.
var sections = []string{"server", "cache", "space", "origin", "log", "security", "limits", "monitor", "cmsd"}

func (t *translator) render(name string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# hepcache configuration translated from the XCache configuration %s\n", name)
	fmt.Fprintf(&b, "# by `hepcache from-xcache`. Each key names the directive it came from. Check it\n")
	fmt.Fprintf(&b, "# with `hepcache check --config FILE`; every key: /usr/share/doc/hepcache/hepcache.toml.\n")
	if len(t.warns) > 0 {
		fmt.Fprintf(&b, "#\n# Not translated, or with another meaning in hepcache (%d):\n", len(t.warns))
		for _, w := range t.warns {
			fmt.Fprintf(&b, "#   - %s\n", w)
		}
	}
	for _, sec := range sections {
		var keys []string
		for _, k := range t.order {
			if strings.HasPrefix(k, sec+".") {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n[%s]\n", sec)
		for _, k := range keys {
			e := t.keys[k]
			for _, w := range e.why {
				fmt.Fprintf(&b, "# %s\n", w)
			}
			fmt.Fprintf(&b, "%s = %s\n", strings.TrimPrefix(k, sec+"."), e.val)
		}
	}
	for _, is := range t.issuers {
		if is.issuer == "" {
			continue
		}
		fmt.Fprintf(&b, "\n# scitokens.cfg [Issuer %s]\n[[security.issuer]]\nissuer = %s\n", is.name, q(is.issuer))
		if len(is.audiences) > 0 {
			fmt.Fprintf(&b, "audiences = %s\n", qlist(is.audiences))
		}
		if len(is.restrictedPaths) > 0 {
			fmt.Fprintf(&b, "restricted_paths = %s\n", qlist(is.restrictedPaths))
		}
		if !is.uses("capability") {
			fmt.Fprintf(&b, "# authorization_strategy = %s: no capability\nignore_scopes = true\n", is.strategy)
		}
		if !is.uses("group") || is.groupsClaim != "" && is.groupsClaim != "wlcg.groups" {
			fmt.Fprintf(&b, "# authorization_strategy = %s, groups_claim = %s: the token's wlcg.groups do not count\nignore_groups = true\n", is.strategy, is.groupsClaim)
		}
		if len(is.basePaths) > 0 {
			fmt.Fprintf(&b, "base_path = %s\n", q(is.basePaths[0]))
			if len(is.basePaths) > 1 {
				fmt.Fprintf(&b, "# further base paths %s: a token's scopes are read relative to the first; give each its own issuer table if they differ\n", strings.Join(is.basePaths[1:], ", "))
			}
		}
	}
	for _, r := range t.rules {
		fmt.Fprintf(&b, "\n# from the exports, acc.authdb and scitokens.cfg; as XRootD, path covers every path that starts with it\n[[security.rule]]\npath = %s\nmatch = \"prefix\"\nread = %s\n", q(r.path), qlist(r.read))
		if len(r.deny) > 0 {
			fmt.Fprintf(&b, "deny = %s\n", qlist(r.deny))
		}
	}
	return []byte(b.String())
}

// q quotes s as a TOML basic string.
func q(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

func qlist(l []string) string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = q(s)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

func notWorldReadable(name string) bool {
	st, err := os.Stat(name)
	return err == nil && st.Mode().Perm()&0o004 == 0
}
