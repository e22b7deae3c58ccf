package pelican

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/nsauth"
)

// States of the membership, as logs, metrics and `hepcache pelican
// status` name them.
const (
	StateStarting    = "starting"
	StateUnreachable = "federation unreachable"
	StateRegistered  = "registered"
	StatePending     = "pending approval"
	StateRefused     = "refused"
	StateAdvertising = "advertising"
	StateStopped     = "stopped"
)

// Status is the membership as it stands.
type Status struct {
	State string
	// Reason says why, for the states that need one (refused,
	// unreachable, pending approval).
	Reason string
	Since  time.Time
	// Federation endpoints as discovered ("" until then).
	Director, Registry string
	// Prefix is the registry prefix, /caches/<site>; KeyID the key's id.
	Prefix, KeyID string
	// LastAd is when the director last accepted an ad (zero: never).
	LastAd time.Time
	// Namespaces is the number of namespaces in force.
	Namespaces int
	// FedTokenExpiry is when the federation token held expires (zero:
	// none held).
	FedTokenExpiry time.Time
	// DirectorTest is the last director test report ("ok", "error: ..."),
	// DirectorTestAt its time.
	DirectorTest   string
	DirectorTestAt time.Time
}

// Stats are the membership's counters.
type Stats struct {
	Ads            atomic.Int64 // ads the director accepted
	AdFailures     atomic.Int64 // ads not accepted: unreachable, refused, not now
	Registrations  atomic.Int64 // registrations the registry created
	FedTokens      atomic.Int64 // federation tokens obtained
	FedTokenErrors atomic.Int64
	DirectorTests  atomic.Int64 // director test reports received (ok or error)
	DirectorTestOK atomic.Int64 // of which ok
}

// Member is the cache's membership of a Pelican federation: it registers
// the cache's key, advertises the cache to the director every
// AdvertiseInterval, keeps a federation token for origin reads and the
// namespace list for authorization, and serves the director's web API. Its
// goroutines run from Start until Close.
type Member struct {
	cfg   Config
	log   *slog.Logger
	key   *Key
	c     *client
	auth  *nsauth.Authorizer
	stats Stats

	instance string
	start    time.Time
	gen      atomic.Uint64
	serverID string

	// fedTok is the federation token for origin reads ("" none).
	fedTok atomic.Pointer[heldToken]
	// fedVerifier verifies tokens the federation signs (director test
	// reports, scrapes); nil until discovery.
	fedVerifier atomic.Pointer[token.Verifier]

	// mu protects st, fed and ns.
	mu  sync.Mutex
	st  Status
	fed federation
	ns  namespaceList

	// approved is closed once the registry approved the cache (the fed
	// token loop waits for it).
	approved     chan struct{}
	approvedOnce sync.Once
	// nsFailing is set while the namespace list cannot be read,
	// tokFailing while no federation token can be had.
	nsFailing, tokFailing atomic.Bool
	// wake asks the membership loop to run now (tests, Leave).
	wake chan struct{}

	shutdown  chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

type heldToken struct {
	tok            string
	issued, expiry time.Time
}

// New validates cfg, loads the key (creating it when absent) and the
// state kept from earlier runs. It contacts nobody: Start does.
func New(cfg *Config) (*Member, error) {
	c := *cfg
	c.Namespaces = append([]string(nil), cfg.Namespaces...)
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("pelican: %w", err)
	}
	key, created, err := LoadOrCreateKey(c.KeyFile)
	if err != nil {
		return nil, err
	}
	if created {
		c.Logger.Info("pelican: created the cache's key", "file", c.KeyFile, "kid", key.KID())
	}
	auth, err := nsauth.New(&nsauth.Config{Audiences: c.Audiences, RootCAs: c.RootCAs, AllowTokensWithoutTLS: c.AllowTokensWithoutTLS, Logger: c.Logger})
	if err != nil {
		return nil, fmt.Errorf("pelican: %w", err)
	}
	m := &Member{cfg: c, log: c.Logger, key: key, c: newClient(&c), auth: auth,
		instance: newInstanceID(), start: c.now(), approved: make(chan struct{}),
		wake: make(chan struct{}, 1), shutdown: make(chan struct{})}
	m.st = Status{State: StateStarting, Since: c.now(), Prefix: c.Prefix(), KeyID: key.KID()}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("pelican: state dir: %w", err)
	}
	if m.serverID, err = m.loadServerID(); err != nil {
		return nil, err
	}
	m.loadNamespaces()
	return m, nil
}

// Authorizer is the namespace authorization the membership keeps up to
// date; the server puts it in front of the site's.
func (m *Member) Authorizer() *nsauth.Authorizer { return m.auth }

// KeyFile is where the cache's key is kept.
func (m *Member) KeyFile() string { return m.key.File() }

// Stats returns the counters.
func (m *Member) Stats() *Stats { return &m.stats }

// Status returns the membership as it stands.
func (m *Member) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.st
	st.Director, st.Registry = m.fed.Director, m.fed.Registry
	st.Namespaces = len(m.ns.parsed)
	if t := m.fedTok.Load(); t != nil {
		st.FedTokenExpiry = t.expiry
	}
	return st
}

// setState moves to state (logging the change, not every repetition).
func (m *Member) setState(state, reason string) {
	m.mu.Lock()
	changed := m.st.State != state || m.st.Reason != reason
	if changed {
		m.st.State, m.st.Reason, m.st.Since = state, reason, m.cfg.now()
	}
	m.mu.Unlock()
	if !changed {
		return
	}
	attrs := []any{"state", state, "prefix", m.cfg.Prefix()}
	if reason != "" {
		attrs = append(attrs, "reason", reason)
	}
	switch state {
	case StateRefused, StateUnreachable:
		m.log.Error("pelican: "+state, attrs...)
	case StatePending:
		m.log.Warn("pelican: the cache is registered and waits for a federation administrator to approve it (the registry requires approval of caches); asking again every "+min(m.cfg.RegisterRetry, m.cfg.AdvertiseInterval).String()+" and advertising once approved", attrs...)
	default:
		m.log.Info("pelican: "+state, attrs...)
	}
}

// Start begins registering and advertising in the background. It returns
// at once.
func (m *Member) Start() {
	m.wg.Add(3)
	go func() { defer m.wg.Done(); m.run() }()
	go func() { defer m.wg.Done(); m.runFedToken() }()
	go func() { defer m.wg.Done(); m.watchDowntimes() }()
}

// Close stops the membership's goroutines and waits for them; the director
// forgets the cache when its last ad expires (Leave tells it at once).
// Idempotent.
func (m *Member) Close() error {
	m.closeOnce.Do(func() { close(m.shutdown) })
	m.wg.Wait()
	m.c.close()
	m.auth.Close()
	if v := m.fedVerifier.Load(); v != nil {
		v.Close()
	}
	m.setState(StateStopped, "")
	return nil
}

// Leave tells the director that the cache is shutting down (an ad with
// status "shutting down": it sends no new clients while those in progress
// finish), then stops advertising. Errors are logged: the ad expires
// anyway.
func (m *Member) Leave(ctx context.Context) {
	m.closeOnce.Do(func() { close(m.shutdown) })
	m.wg.Wait()
	m.mu.Lock()
	fed, advertising := m.fed, m.st.State == StateAdvertising
	m.mu.Unlock()
	if !advertising {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.advertise(ctx, fed, "shutting down"); err != nil {
		m.log.Warn("pelican: could not tell the director the cache is shutting down", "err", err)
	}
}

// sleep waits d, or until woken or shut down; false when shutting down.
func (m *Member) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-m.wake:
		return true
	case <-m.shutdown:
		return false
	}
}

// ctx is a context ended by Close.
func (m *Member) ctx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-m.shutdown:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// run is the membership loop: discover, register, wait for approval,
// then advertise every AdvertiseInterval.
func (m *Member) run() {
	ctx, cancel := m.ctx()
	defer cancel()
	for {
		wait := m.step(ctx)
		// A downtime that starts or ends is advertised then (a moment
		// after, so that it is in force, or over, when the ad is made).
		if edge, ok := m.nextDowntimeEdge(m.cfg.now()); ok && edge+time.Second < wait {
			wait = edge + time.Second
		}
		if !m.sleep(wait) {
			return
		}
	}
}

// step does what the membership needs next and returns how long to wait
// before the following step.
func (m *Member) step(ctx context.Context) time.Duration {
	m.mu.Lock()
	fed := m.fed
	m.mu.Unlock()
	if fed.Director == "" {
		var err error
		if fed, err = m.discover(ctx); err != nil {
			m.stats.AdFailures.Add(1)
			m.setState(StateUnreachable, err.Error())
			return m.cfg.RegisterRetry
		}
	}
	select {
	case <-m.approved:
	default:
		state, reason, err := m.ensureRegistered(ctx, fed)
		if err != nil {
			m.setState(StateUnreachable, err.Error())
			return m.cfg.RegisterRetry
		}
		m.setState(state, reason)
		if state == StatePending {
			// Asked again soon: once approved, the same step advertises,
			// without waiting for the next advertisement interval.
			return min(m.cfg.RegisterRetry, m.cfg.AdvertiseInterval)
		}
		if state == StateRefused {
			return m.cfg.AdvertiseInterval
		}
		m.approvedOnce.Do(func() { close(m.approved) })
	}
	m.refreshNamespaces(ctx, fed)
	if err := m.advertiseRetrying(ctx, fed); err != nil {
		if ctx.Err() != nil {
			return 0
		}
		m.stats.AdFailures.Add(1)
		var ae *apiError
		switch {
		case errors.As(err, &ae) && ae.Approval:
			m.setState(StatePending, ae.Msg)
		case errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && !ae.retryable():
			m.setState(StateRefused, "the director refused the advertisement: "+ae.Msg)
		default:
			m.setState(StateUnreachable, err.Error())
		}
		return m.cfg.AdvertiseInterval
	}
	m.stats.Ads.Add(1)
	m.mu.Lock()
	m.st.LastAd = m.cfg.now()
	m.mu.Unlock()
	m.setState(StateAdvertising, "")
	return m.cfg.AdvertiseInterval
}

// discover learns the federation's endpoints (or takes the configured
// ones) and sets up the verification of the federation's own tokens. When
// the discovery URL does not answer, the endpoints an earlier run
// discovered are used, so that a cache restarted while the federation is
// away serves what it holds and reads through the director it knew.
func (m *Member) discover(ctx context.Context) (federation, error) {
	fed := federation{Discovery: m.cfg.Federation, Director: m.cfg.DirectorURL, Registry: m.cfg.RegistryURL}
	saved := filepath.Join(m.cfg.StateDir, "federation.json")
	if m.cfg.Federation != "" {
		d, err := m.c.discover(ctx, m.cfg.Federation)
		if err != nil {
			var old federation
			b, rerr := os.ReadFile(saved)
			if rerr != nil || json.Unmarshal(b, &old) != nil || old.Director == "" || old.Discovery != m.cfg.Federation {
				return fed, err
			}
			m.log.Warn("pelican: federation discovery failed; using the endpoints discovered before", "err", err, "director", old.Director)
			d = old
		} else if b, err := json.Marshal(d); err == nil {
			if err := writeFileAtomic(saved, b, 0o644); err != nil {
				m.log.Warn("pelican: could not save the federation's endpoints", "err", err)
			}
		}
		if fed.Director == "" {
			fed.Director = d.Director
		}
		if fed.Registry == "" {
			fed.Registry = d.Registry
		}
		fed.Discovery, fed.JWKS = d.Discovery, d.JWKS
	}
	if fed.JWKS != "" {
		v, err := token.New(&token.Config{
			Issuers:   []token.Issuer{{Issuer: fed.Discovery, JWKSURL: fed.JWKS}},
			Audiences: []string{m.cfg.WebURL, strings.TrimRight(m.cfg.WebURL, "/") + "/", "prometheus"},
			RootCAs:   m.cfg.RootCAs,
		})
		if err != nil {
			return fed, fmt.Errorf("federation issuer %s: %w", fed.Discovery, err)
		}
		if old := m.fedVerifier.Swap(v); old != nil {
			old.Close()
		}
	}
	m.mu.Lock()
	m.fed = fed
	m.mu.Unlock()
	m.log.Info("pelican: federation discovered", "federation", fed.Discovery, "director", fed.Director, "registry", fed.Registry)
	return fed, nil
}

// ensureRegistered makes sure the registry knows the cache under its key
// and says whether the cache may advertise (StateRegistered), must wait
// for approval, or is refused. err is set when the registry could not be
// asked.
func (m *Member) ensureRegistered(ctx context.Context, fed federation) (state, reason string, err error) {
	prefix := m.cfg.Prefix()
	exists, match, err := m.c.keyStatus(ctx, fed.Registry, prefix, m.key)
	if err != nil {
		return "", "", err
	}
	switch {
	case exists && !match:
		return StateRefused, fmt.Sprintf("%s is registered under another key than %s (kid %s): restore the key that registered it, or ask the federation to delete the registration", prefix, m.key.File(), m.key.KID()), nil
	case !exists:
		m.setState(StateStarting, "registering "+prefix)
		res, err := m.c.register(ctx, fed.Registry, prefix, m.cfg.Site, m.serverID, m.key)
		var ae *apiError
		if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 {
			return StateRefused, "the registry refused the registration: " + ae.Msg, nil
		}
		if err != nil {
			return "", "", err
		}
		if res.Created {
			m.stats.Registrations.Add(1)
		}
		m.log.Info("pelican: registered", "prefix", prefix, "kid", m.key.KID(), "server_id", m.serverID, "registry", fed.Registry, "message", res.Msg)
	}
	ok, err := m.c.approved(ctx, fed.Registry, prefix)
	if err != nil {
		return "", "", err
	}
	if !ok {
		return StatePending, prefix + " awaits approval at " + fed.Registry, nil
	}
	return StateRegistered, "", nil
}

// refreshNamespaces reads the director's namespace list; on failure the
// list in force stays.
func (m *Member) refreshNamespaces(ctx context.Context, fed federation) {
	raw, err := m.c.rawNamespaces(ctx, fed.Director)
	if err != nil {
		// Said once per outage: the state (unreachable) says the rest.
		if !m.nsFailing.Swap(true) {
			m.log.Warn("pelican: could not read the director's namespace list; keeping the one in force", "err", err)
		}
		return
	}
	if m.nsFailing.Swap(false) {
		m.log.Info("pelican: the director's namespace list is readable again")
	}
	m.setNamespaces(raw, true)
}

// setNamespaces puts a list in force (and saves it when persist).
func (m *Member) setNamespaces(raw []json.RawMessage, persist bool) {
	l, err := parseNamespaces(raw, m.cfg.Namespaces)
	if err != nil {
		m.log.Warn("pelican: "+err.Error(), "director_entries", len(raw))
	}
	if err := m.auth.Set(l.authz()); err != nil {
		m.log.Warn("pelican: namespaces left out of authorization", "err", err)
	}
	m.mu.Lock()
	changed := len(m.ns.parsed) != len(l.parsed)
	m.ns = l
	m.mu.Unlock()
	if changed {
		m.log.Info("pelican: namespaces", "count", len(l.parsed))
	}
	if persist {
		b, _ := json.Marshal(raw)
		if err := writeFileAtomic(filepath.Join(m.cfg.StateDir, "namespaces.json"), b, 0o644); err != nil {
			m.log.Warn("pelican: could not save the namespace list", "err", err)
		}
	}
}

// loadNamespaces puts in force the list saved by an earlier run, so that
// a cache restarted while the director is away knows what is public.
func (m *Member) loadNamespaces() {
	b, err := os.ReadFile(filepath.Join(m.cfg.StateDir, "namespaces.json"))
	if err != nil {
		return
	}
	var raw []json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		m.log.Warn("pelican: the saved namespace list does not decode; waiting for the director's")
		return
	}
	m.setNamespaces(raw, false)
}

// loadServerID returns the server id given at the first registration,
// making one when there is none.
func (m *Member) loadServerID() (string, error) {
	file := filepath.Join(m.cfg.StateDir, "server-id")
	if b, err := os.ReadFile(file); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" && len(id) <= 64 {
			return id, nil
		}
	}
	id := newServerID()
	if err := writeFileAtomic(file, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("pelican: server id: %w", err)
	}
	return id, nil
}

// advertiseRetrying advertises; a director that says "not now" (429,
// 503) is asked again after its Retry-After (at most 3 times, each wait
// at most a fifth of the advertise interval), as Pelican's own servers do
// (launcher_utils/advertise.go doAdvertise).
func (m *Member) advertiseRetrying(ctx context.Context, fed federation) error {
	err := m.advertise(ctx, fed, "")
	for attempt := 0; attempt < 3; attempt++ {
		var ae *apiError
		if !errors.As(err, &ae) || !ae.retryable() {
			return err
		}
		d := ae.RetryAfter
		if d <= 0 {
			d = 2 * time.Second
		}
		d = min(d, max(m.cfg.AdvertiseInterval/5, time.Second))
		m.log.Info("pelican: the director asks to advertise again later", "status", ae.Status, "retry_after", d.String(), "message", ae.Msg)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		err = m.advertise(ctx, fed, "")
	}
	return err
}

// advertise sends one ad with status ("" for the cache's health).
func (m *Member) advertise(ctx context.Context, fed federation, status string) error {
	tok, err := m.advertiseToken(fed.Director)
	if err != nil {
		return err
	}
	if status == "" {
		status = "ok"
		if m.cfg.Health != nil {
			status = m.cfg.Health()
		}
	}
	m.mu.Lock()
	ns := m.ns.raw
	m.mu.Unlock()
	now := m.cfg.now()
	downtimes, err := m.adDowntimes(now)
	if err != nil {
		m.log.Warn("pelican: the downtimes cannot be read; advertising none", "err", err)
	}
	ad := &advertisement{
		Name: m.cfg.Site, StartTime: m.start.Unix(), InstanceID: m.instance, GenerationID: m.gen.Add(1),
		Version: m.cfg.Version, Expiration: now.Add(m.cfg.AdLifetime),
		ServerID: m.serverID, RegistryPrefix: m.cfg.Prefix(), DataURL: m.cfg.DataURL, WebURL: m.cfg.WebURL,
		Coordinate: m.cfg.coordinate,
		Namespaces: ns, Issuer: []json.RawMessage{}, Downtimes: downtimes, RequiredFeatures: []string{},
		Now: now, Status: status,
	}
	if ad.Namespaces == nil {
		ad.Namespaces = []json.RawMessage{}
	}
	return m.c.advertise(ctx, fed.Director, tok, ad)
}

// advertiseToken is the token that proves the ad comes from the key the
// registry holds for the prefix: ES256 with the key's kid, scope
// pelican.advertise, a minute long, for the director's audience
// (server_utils.GetAdvertisementTok, cache/advertise.go GetAdTokCfg).
func (m *Member) advertiseToken(director string) (string, error) {
	aud, err := wlcgAudience(director)
	if err != nil {
		return "", err
	}
	now := m.cfg.now()
	return m.key.JWT(map[string]any{
		"iss":      m.cfg.WebURL,
		"sub":      m.cfg.DataURL,
		"aud":      aud,
		"scope":    "pelican.advertise",
		"iat":      now.Unix(),
		"nbf":      now.Unix(),
		"exp":      now.Add(time.Minute).Unix(),
		"jti":      newInstanceID(),
		"wlcg.ver": "1.0",
	})
}

// wlcgAudience is the audience a Pelican service names for a URL:
// scheme://host with the port only when it is not the scheme's
// (token/token_create.go GetWLCGAudience).
func wlcgAudience(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("audience of %q: not an absolute URL", raw)
	}
	port := u.Port()
	if port == "" || u.Scheme == "https" && port == "443" || u.Scheme == "http" && port == "80" {
		return u.Scheme + "://" + u.Hostname(), nil
	}
	return u.Scheme + "://" + u.Hostname() + ":" + port, nil
}

// runFedToken keeps a federation token once the cache is approved,
// renewing it at a third of its lifetime (cache/advertise.go
// LaunchFedTokManager does the same).
func (m *Member) runFedToken() {
	select {
	case <-m.approved:
	case <-m.shutdown:
		return
	}
	ctx, cancel := m.ctx()
	defer cancel()
	for {
		wait := m.fetchFedToken(ctx)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-m.shutdown:
			t.Stop()
			return
		}
	}
}

// fetchFedToken gets a federation token and returns when to renew it.
func (m *Member) fetchFedToken(ctx context.Context) time.Duration {
	m.mu.Lock()
	fed := m.fed
	m.mu.Unlock()
	adv, err := m.advertiseToken(fed.Director)
	var tok string
	if err == nil {
		tok, err = m.c.fedToken(ctx, fed.Director, adv, m.cfg.Site)
	}
	if err != nil {
		if ctx.Err() == nil {
			m.stats.FedTokenErrors.Add(1)
			// Said once until a token comes again.
			if !m.tokFailing.Swap(true) {
				held := "none is held: origins that admit only the federation's caches refuse this one until it comes"
				if t := m.fedTok.Load(); t != nil {
					held = "the one held expires at " + t.expiry.UTC().Format(time.RFC3339)
				}
				m.log.Warn("pelican: could not get a federation token; trying every "+defaultTokenRetry.String()+"; "+held, "err", err)
			}
		}
		return defaultTokenRetry
	}
	m.tokFailing.Store(false)
	now := m.cfg.now()
	issued, expiry := tokenTimes(tok, now)
	m.fedTok.Store(&heldToken{tok: tok, issued: issued, expiry: expiry})
	m.stats.FedTokens.Add(1)
	m.log.Info("pelican: federation token obtained", "expires", expiry.UTC().Format(time.RFC3339))
	return renewIn(issued, expiry, now)
}

// tokenTimes reads iat and exp of a token without verifying it (the token
// comes from the director over TLS and is only passed on); a token
// without them counts as issued now and valid a minute.
func tokenTimes(tok string, now time.Time) (issued, expiry time.Time) {
	issued, expiry = now, now.Add(time.Minute)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return
	}
	var c struct {
		Iat, Exp *float64
	}
	if json.Unmarshal(b, &c) != nil {
		return
	}
	if c.Iat != nil {
		issued = time.Unix(int64(*c.Iat), 0)
	}
	if c.Exp != nil {
		expiry = time.Unix(int64(*c.Exp), 0)
	}
	return
}

// renewIn is the wait until a token issued at issued and expiring at
// expiry should be renewed: a third into its lifetime, at least a second
// from now.
func renewIn(issued, expiry, now time.Time) time.Duration {
	at := issued.Add(expiry.Sub(issued) / 3)
	return max(at.Sub(now), time.Second)
}

// Authorize adds the federation token to a request to an origin (through
// the director's origin redirect); without one the request goes as it is
// (public namespaces need none). It has the shape of origin/http's
// Config.Authorize.
func (m *Member) Authorize(r *http.Request) error {
	if t := m.fedTok.Load(); t != nil && m.cfg.now().Before(t.expiry) {
		r.Header.Set("Authorization", "Bearer "+t.tok)
	}
	return nil
}

// OriginURL is the director's origin redirect (director.go
// redirectToOrigin), through which the cache reads what it misses: the
// origin URL of the cache's default origin. "" before discovery.
func (m *Member) OriginURL() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fed.Director == "" {
		return ""
	}
	return join(m.fed.Director, "api", "v1.0", "director", "origin")
}

// Discover learns the federation's endpoints now (once; Start would do it
// in the background), so that the server can read through the director.
func (m *Member) Discover(ctx context.Context) error {
	m.mu.Lock()
	done := m.fed.Director != ""
	m.mu.Unlock()
	if done {
		return nil
	}
	_, err := m.discover(ctx)
	return err
}

// writeFileAtomic writes b to file through a temporary file and a rename.
func writeFileAtomic(file string, b []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".tmp-"+filepath.Base(file)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}
