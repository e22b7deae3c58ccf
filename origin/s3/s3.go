// Package s3origin reads files from an S3 bucket (AWS, Ceph RADOS gateway,
// MinIO, versitygw...) with SigV4-signed requests: stat from HEAD, ranged
// GETs pinned to the ETag seen at open (If-Match, and the answer's ETag
// checked), listings from ListObjectsV2, CRC32C checksums when the object
// store keeps them. Object store answers map to the origin sentinels; a
// throttled or failing server is retried with back-off.
package s3origin

import (
	"context"
	"crypto/tls"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/originhttp"
	"github.com/hepcache/hepcache/internal/sigv4"
	"github.com/hepcache/hepcache/origin"
)

// Defaults. A zero Config field means "use the default".
const (
	// defaultRegion is the region of the signature scope when none is
	// given; most non-AWS object stores accept any region, and this one.
	defaultRegion = "us-east-1"
	// defaultMaxConns bounds the TCP connections to the endpoint, as for
	// http(s) origins: the cache reads pieces of several blocks at once.
	defaultMaxConns = 16
	// defaultIdleConnTimeout keeps an idle connection for the next read.
	defaultIdleConnTimeout = 90 * time.Second
	// defaultDialTimeout bounds the TCP (and TLS) handshake.
	defaultDialTimeout = 10 * time.Second
	// defaultMaxRetries is how often a throttled (SlowDown, 503) or
	// failed (500) request is sent again: with the back-off below, about
	// 6 s of waiting in all, within the cache's origin timeout.
	defaultMaxRetries = 5
	// defaultRetryBase is the first back-off; each retry doubles it, with
	// full jitter, as AWS advises for SlowDown.
	defaultRetryBase = 200 * time.Millisecond
	// defaultLogInterval is the least time between two log lines of one
	// kind of trouble (unreachable, refused, throttled) for one origin: a
	// dead endpoint fails every block of every file.
	defaultLogInterval = time.Minute
	// maxListPage is the largest ListObjectsV2 page S3 gives (max-keys).
	maxListPage = 1000
	// maxListEntries bounds one directory listing held in memory.
	maxListEntries = 1_000_000
)

// Config configures an Origin.
type Config struct {
	// URL names the bucket and an optional key prefix:
	// "s3://bucket/prefix". Origin path /a/b is object "prefix/a/b".
	// Required.
	URL string
	// Endpoint is the object store's base URL ("https://s3.example.org",
	// "http://127.0.0.1:7070"). Default https://s3.<region>.amazonaws.com.
	Endpoint string
	// Region is the signature's region. Default us-east-1.
	Region string
	// Addressing is "path" (endpoint/bucket/key, what most non-AWS stores
	// want), "virtual" (bucket.endpoint/key) or "" (default): virtual on
	// amazonaws.com, path elsewhere.
	Addressing string
	// Credentials sign every request. Default anonymous (unsigned
	// requests, for public buckets).
	Credentials Credentials
	// MaxConns bounds concurrent connections to the endpoint. Default 16.
	MaxConns int
	// IdleConnTimeout is how long an idle connection is kept. Default 90 s.
	IdleConnTimeout time.Duration
	// DialTimeout bounds the TCP and TLS handshake. Default 10 s.
	DialTimeout time.Duration
	// MaxRetries is how often a throttled or failed request is sent again
	// before the origin counts as unavailable. Default 5; -1 for none.
	MaxRetries int
	// RetryBase is the first back-off, doubled at each retry (with
	// jitter). Default 200 ms.
	RetryBase time.Duration
	// LogInterval is the least time between two log lines of one kind of
	// trouble. Default 1 min.
	LogInterval time.Duration
	// TLSConfig is used for an https endpoint (extra CAs). Nil: the system
	// roots.
	TLSConfig *tls.Config
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger

	// listPageSize is max-keys of ListObjectsV2 (default 1000); a test
	// seam to page with few objects.
	listPageSize int
	// now and sleep are the clock; test seams.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.Region == "" {
		c.Region = defaultRegion
	}
	if c.Endpoint == "" {
		c.Endpoint = "https://s3." + c.Region + ".amazonaws.com"
	}
	if c.Credentials == nil {
		c.Credentials = Anonymous()
	}
	if c.MaxConns == 0 {
		c.MaxConns = defaultMaxConns
	}
	if c.IdleConnTimeout == 0 {
		c.IdleConnTimeout = defaultIdleConnTimeout
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = defaultDialTimeout
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = defaultMaxRetries
	}
	if c.RetryBase == 0 {
		c.RetryBase = defaultRetryBase
	}
	if c.LogInterval == 0 {
		c.LogInterval = defaultLogInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.listPageSize == 0 {
		c.listPageSize = maxListPage
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.sleep == nil {
		c.sleep = sleepCtx
	}
}

// Validate reports every problem with the configuration in one error.
func (c *Config) Validate() error {
	var errs []error
	if _, _, err := ParseURL(c.URL); err != nil {
		errs = append(errs, err)
	}
	if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		errs = append(errs, fmt.Errorf("endpoint %q: want http(s)://host[:port], no path or query", c.Endpoint))
	}
	switch c.Addressing {
	case "", "path", "virtual":
	default:
		errs = append(errs, fmt.Errorf("addressing %q: want path, virtual or empty (auto)", c.Addressing))
	}
	if c.MaxConns < 0 || c.MaxRetries < -1 || c.RetryBase < 0 || c.IdleConnTimeout < 0 || c.DialTimeout < 0 || c.LogInterval < 0 {
		errs = append(errs, errors.New("max conns, retries, retry base, timeouts and log interval must not be negative"))
	}
	if c.listPageSize < 1 || c.listPageSize > maxListPage {
		errs = append(errs, fmt.Errorf("list page size %d: 1 to %d", c.listPageSize, maxListPage))
	}
	return errors.Join(errs...)
}

// ParseURL splits "s3://bucket/prefix" into the bucket and the key prefix
// ("" or ending in "/").
func ParseURL(raw string) (bucket, prefix string, err error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("s3 url %q: %w", raw, err)
	case u.Scheme != "s3":
		return "", "", fmt.Errorf("s3 url %q: scheme must be s3", raw)
	case u.User != nil || u.Port() != "" || u.RawQuery != "" || u.Fragment != "":
		return "", "", fmt.Errorf("s3 url %q: want s3://bucket/prefix, no user, port, query or fragment", raw)
	case !validBucket(u.Host):
		return "", "", fmt.Errorf("s3 url %q: bucket %q: 3 to 63 letters, digits, '.', '-' or '_'", raw, u.Host)
	}
	p := strings.Trim(path.Clean("/"+u.Path), "/")
	if p != "" {
		p += "/"
	}
	return u.Host, p, nil
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Origin is an S3 bucket (and key prefix) read as an origin. It implements
// origin.Origin and is safe for concurrent use.
type Origin struct {
	cfg      Config
	bucket   string
	prefix   string // "" or "a/b/"
	endpoint *url.URL
	virtual  bool
	name     string
	client   *http.Client
	tr       *http.Transport
	logs     logLimiter
}

var _ origin.Origin = (*Origin)(nil)

// New returns an Origin for cfg. It does not contact the endpoint.
func New(cfg *Config) (*Origin, error) {
	c := *cfg
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("s3 origin config: %w", err)
	}
	bucket, prefix, _ := ParseURL(c.URL)
	ep, _ := url.Parse(c.Endpoint)
	ep.Path = ""
	o := &Origin{cfg: c, bucket: bucket, prefix: prefix, endpoint: ep,
		name: "s3://" + bucket + "/" + strings.TrimSuffix(prefix, "/")}
	o.name = strings.TrimSuffix(o.name, "/")
	switch c.Addressing {
	case "virtual":
		o.virtual = true
	case "":
		o.virtual = strings.HasSuffix(ep.Hostname(), ".amazonaws.com") && !strings.Contains(bucket, ".")
	}
	o.tr = originhttp.Transport(c.DialTimeout, c.TLSConfig, c.MaxConns, c.IdleConnTimeout)
	o.client = &http.Client{Transport: o.tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		// S3 redirects only to another region's endpoint, where the
		// signature (scoped to a region) is invalid anyway.
		return http.ErrUseLastResponse
	}}
	o.logs = logLimiter{interval: c.LogInterval, now: c.now, last: map[string]time.Time{}, skipped: map[string]int{}}
	return o, nil
}

// Dial returns a function creating an Origin for a canonical origin URL
// ("s3://bucket/prefix") with cfg's other settings; it has the shape of
// upstream.DialFunc.
func Dial(cfg Config) func(ctx context.Context, canonical string) (origin.Origin, error) {
	return func(ctx context.Context, canonical string) (origin.Origin, error) {
		c := cfg
		c.URL = canonical
		return New(&c)
	}
}

// String implements origin.Origin: "s3://bucket/prefix".
func (o *Origin) String() string { return o.name }

// Close implements origin.Origin.
func (o *Origin) Close() error {
	o.tr.CloseIdleConnections()
	return nil
}

// key maps an origin path to the object key.
func (o *Origin) key(p string) string {
	return o.prefix + strings.TrimPrefix(path.Clean("/"+p), "/")
}

// objectName is "bucket/key" for messages.
func (o *Origin) objectName(key string) string { return o.bucket + "/" + key }

// requestURL is the URL of key (or of the bucket, key ""), with query.
// Path and query are encoded exactly as sigv4 signs them.
func (o *Origin) requestURL(key string, query url.Values) *url.URL {
	u := *o.endpoint
	p := "/" + key
	if o.virtual {
		u.Host = o.bucket + "." + u.Host
	} else {
		p = "/" + o.bucket + p
	}
	u.Path, u.RawPath = p, sigv4.Escape(p, false)
	if len(query) > 0 {
		var parts []string
		for k, vs := range query {
			for _, v := range vs {
				parts = append(parts, sigv4.Escape(k, true)+"="+sigv4.Escape(v, true))
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	return &u
}

// request is one S3 call: method, key ("" for the bucket), query and
// headers. It has no body: the cache only reads.
type request struct {
	method string
	key    string
	query  url.Values
	header http.Header
}

// op names a request in errors: "s3 GET bucket/key".
func (o *Origin) op(r request) string {
	if r.key == "" && r.query.Get("list-type") != "" {
		return fmt.Sprintf("s3 LIST %s/%s", o.bucket, r.query.Get("prefix"))
	}
	return fmt.Sprintf("s3 %s %s", r.method, o.objectName(r.key))
}

// do sends r, retrying throttled and failed attempts with back-off. A
// response with a status below 300 (or 304/412/416, which callers judge)
// is returned with its body open; any other status is turned into an
// error wrapping an origin sentinel.
func (o *Origin) do(ctx context.Context, r request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := o.send(ctx, r)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode < 300 || resp.StatusCode == http.StatusPreconditionFailed ||
			resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
			return resp, nil
		}
		e := o.responseError(r, resp)
		if !e.retryable() || attempt >= o.cfg.MaxRetries {
			e.attempts = attempt + 1
			o.logTrouble(e)
			return nil, e
		}
		// Full jitter: retries of many readers spread out instead of
		// hitting the throttled server together.
		backoff := o.cfg.RetryBase << attempt
		backoff = time.Duration(rand.Int64N(int64(backoff)) + 1)
		if err := o.cfg.sleep(ctx, backoff); err != nil {
			return nil, fmt.Errorf("%s: waiting to retry after %s: %w: %w", o.op(r), e.code, err, origin.ErrUnavailable)
		}
	}
}

// send signs and sends one attempt of r.
func (o *Origin) send(ctx context.Context, r request) (*http.Response, error) {
	u := o.requestURL(r.key, r.query)
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", o.op(r), err, origin.ErrInvalid)
	}
	req.URL = u // keep the encoding that is signed
	for k, v := range r.header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "hepcache")
	creds, err := o.cfg.Credentials.Get()
	if err != nil {
		e := &s3Error{op: o.op(r), bucket: o.bucket, code: "NoCredentials", detail: err.Error(), sentinel: origin.ErrNotAuthorized}
		o.logTrouble(e)
		return nil, e
	}
	if creds.AccessKeyID != "" {
		if err := sigv4.Sign(req, creds, o.cfg.Region, "s3", sigv4.EmptySHA256, o.cfg.now()); err != nil {
			return nil, fmt.Errorf("%s: %w: %w", o.op(r), err, origin.ErrNotAuthorized)
		}
	} else {
		// Unsigned (anonymous) requests still name their payload hash:
		// some servers want the header on every request.
		req.Header.Set("X-Amz-Content-Sha256", sigv4.EmptySHA256)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w: %w", o.op(r), ctx.Err(), origin.ErrUnavailable)
		}
		e := &s3Error{op: o.op(r), bucket: o.bucket, code: "Unreachable",
			detail: fmt.Sprintf("endpoint %s unreachable: %v", o.endpoint.Host, unwrapURLError(err)), sentinel: origin.ErrUnavailable, cause: err}
		o.logTrouble(e)
		return nil, e
	}
	return resp, nil
}

// unwrapURLError drops the *url.Error wrapper, whose message repeats the
// whole URL the s3Error already names.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// s3Error is an S3 error answer (or an unreachable endpoint), mapped to an
// origin sentinel. It never holds credentials: S3 error bodies do not echo
// the secret, and only Code and Message are kept from them.
type s3Error struct {
	op       string // "s3 GET bucket/key"
	bucket   string
	status   int
	code     string // S3 error code: NoSuchKey, AccessDenied, SlowDown...
	detail   string
	sentinel error
	cause    error
	attempts int // when retried
}

func (e *s3Error) Error() string {
	msg := e.op + ": "
	if e.status != 0 {
		msg += fmt.Sprintf("%d ", e.status)
	}
	msg += e.code
	if e.detail != "" {
		msg += ": " + e.detail
	}
	if e.attempts > 1 {
		msg += fmt.Sprintf(" (after %d attempts)", e.attempts)
	}
	return msg
}

// Unwrap gives the origin sentinel (errors.Is) and the transport cause.
func (e *s3Error) Unwrap() []error {
	if e.cause != nil {
		return []error{e.sentinel, e.cause}
	}
	return []error{e.sentinel}
}

func (e *s3Error) retryable() bool {
	return e.status == http.StatusServiceUnavailable || e.status == http.StatusInternalServerError ||
		e.status == http.StatusTooManyRequests || e.code == "SlowDown" || e.code == "RequestTimeout"
}

// errorBody is S3's error document.
type errorBody struct {
	Code       string `xml:"Code"`
	Message    string `xml:"Message"`
	BucketName string `xml:"BucketName"`
}

// refusals are the codes of an answer that refuses the cache's credential
// or its permission: the fix is the key or the bucket's policy.
var refusals = map[string]bool{
	"AccessDenied": true, "InvalidAccessKeyId": true, "SignatureDoesNotMatch": true,
	"ExpiredToken": true, "InvalidToken": true, "TokenRefreshRequired": true,
	"AllAccessDisabled": true, "AccountProblem": true, "RequestTimeTooSkewed": true,
}

// responseError reads an error answer (drains and closes the body) and
// maps it to an origin sentinel.
func (o *Origin) responseError(r request, resp *http.Response) *s3Error {
	defer resp.Body.Close()
	var eb errorBody
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	if len(b) > 0 {
		xml.Unmarshal(b, &eb)
	}
	e := &s3Error{op: o.op(r), bucket: o.bucket, status: resp.StatusCode, code: eb.Code}
	if e.code == "" {
		// HEAD answers have no body: the status is all there is.
		e.code = map[int]string{404: "NotFound", 403: "Forbidden", 400: "BadRequest", 503: "ServiceUnavailable",
			500: "InternalError", 301: "PermanentRedirect", 307: "TemporaryRedirect"}[resp.StatusCode]
		if e.code == "" {
			e.code = resp.Status
		}
	}
	msg := strings.TrimSpace(eb.Message)
	// The error reaches clients (kXR_NotAuthorized, the HTTP 403 body),
	// /health and the log: it names no key, not even the access key id
	// (logTrouble names its last characters for the operator), and a
	// store's message that echoes the id (a refusal, a malformed
	// Credential= scope) has it masked.
	if id := o.accessKeyID(); id != "" {
		msg = strings.ReplaceAll(msg, id, "<access key id>")
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	switch {
	case e.code == "NoSuchKey" || e.code == "NoSuchBucket" || e.code == "NotFound" || resp.StatusCode == http.StatusNotFound:
		e.sentinel = origin.ErrNotFound
		if e.code == "NoSuchBucket" {
			msg = fmt.Sprintf("no bucket %q at %s", o.bucket, o.endpoint.Host)
		}
	case refusals[e.code] || resp.StatusCode == http.StatusForbidden:
		e.sentinel = origin.ErrNotAuthorized
		msg = fmt.Sprintf("bucket %q refused the cache's credentials: %s", o.bucket, msg)
	case e.retryable():
		e.sentinel = origin.ErrUnavailable
	case resp.StatusCode == http.StatusMovedPermanently || e.code == "PermanentRedirect" || e.code == "AuthorizationHeaderMalformed":
		e.sentinel = origin.ErrInvalid
		msg += fmt.Sprintf(" (the bucket is in another region than %s, or needs another endpoint)", o.cfg.Region)
	case resp.StatusCode == http.StatusNotImplemented || resp.StatusCode == http.StatusMethodNotAllowed:
		e.sentinel = origin.ErrUnsupported
	default:
		e.sentinel = origin.ErrInvalid
	}
	e.detail = strings.TrimSpace(msg)
	return e
}

// credentialsName names the credentials in use without their secret and
// with only the last characters of the access key id (sigv4.Credentials'
// String), for the log only.
func (o *Origin) credentialsName() string {
	c, err := o.cfg.Credentials.Get()
	if err != nil {
		return "none"
	}
	return c.String()
}

// accessKeyID is the access key id in use, "" when anonymous or unknown.
func (o *Origin) accessKeyID() string {
	c, err := o.cfg.Credentials.Get()
	if err != nil {
		return ""
	}
	return c.AccessKeyID
}

// logTrouble logs an unreachable endpoint, a refusal or throttling once
// per LogInterval per kind for this origin; not-found answers are the
// clients' business and are not logged.
func (o *Origin) logTrouble(e *s3Error) {
	kind := ""
	switch {
	case errors.Is(e.sentinel, origin.ErrUnavailable):
		kind = "unavailable"
	case errors.Is(e.sentinel, origin.ErrNotAuthorized):
		kind = "refused"
	case errors.Is(e.sentinel, origin.ErrInvalid):
		kind = "invalid"
	default:
		return
	}
	if skipped, ok := o.logs.allow(kind); ok {
		args := []any{"origin", o.name, "endpoint", o.endpoint.Host, "err", e.Error()}
		if kind == "refused" {
			args = append(args, "credentials", o.credentialsName())
		}
		if skipped > 0 {
			args = append(args, "similar_errors_suppressed", skipped)
		}
		o.cfg.Logger.Warn("s3 origin: "+kind, args...)
	}
}

// logLimiter lets one log line of a kind through per interval.
type logLimiter struct {
	interval time.Duration
	now      func() time.Time
	// mu protects last and skipped.
	mu      sync.Mutex
	last    map[string]time.Time
	skipped map[string]int
}

// allow reports whether a line of kind may be logged now, and how many
// were held back since the last one.
func (l *logLimiter) allow(kind string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if t, ok := l.last[kind]; ok && now.Sub(t) < l.interval {
		l.skipped[kind]++
		return 0, false
	}
	n := l.skipped[kind]
	l.last[kind], l.skipped[kind] = now, 0
	return n, true
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
