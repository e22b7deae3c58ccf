package config

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// SecurityConfig is the [security] section: TLS, who the clients are
// (tokens, certificates) and what they may do (rules), and the cache's own
// credential towards origins. docs/security.md explains each key.
type SecurityConfig struct {
	// TLSCert and TLSKey are the PEM host certificate (chain) and key for
	// roots:// and https://, re-read on SIGHUP. Default "": no TLS.
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// RequireTLS refuses root:// logins that do not switch to TLS.
	// Default false.
	RequireTLS bool `toml:"require_tls"`
	// RequireAuth makes root:// clients authenticate with a token (ztn,
	// over roots://) or a proxy (gsi); default false: clients without one
	// continue anonymously and the rules decide.
	RequireAuth bool `toml:"require_auth"`
	// AllowTokensWithoutTLS accepts bearer tokens that arrive over
	// unencrypted connections: ?authz= on plain root://, and plain http://
	// (behind a proxy that terminates TLS). Default false: they are
	// ignored, the client is anonymous, and a denial says why (a token
	// sent in the clear can be read and replayed by anyone on the way).
	AllowTokensWithoutTLS bool `toml:"allow_tokens_without_tls"`
	// GSI accepts X.509 proxies over root:// with XRootD's gsi protocol,
	// checked against ca_paths (and vomsdir) like certificates over https.
	// Default false.
	GSI bool `toml:"gsi"`
	// GSICert and GSIKey are the host certificate and RSA key gsi presents
	// (/etc/grid-security/xrd/xrdcert.pem), re-read on SIGHUP. Default "":
	// tls_cert and tls_key.
	GSICert string `toml:"gsi_cert"`
	GSIKey  string `toml:"gsi_key"`
	// CAPaths are CA certificate files or directories that client
	// certificates (and proxies) must chain to. Default empty: client
	// certificates are not requested.
	CAPaths []string `toml:"ca_paths"`
	// VOMSDir trusts VOMS servers (<vo>/<host>.lsc or .pem files). Default
	// "": VOMS attributes are ignored.
	VOMSDir string `toml:"vomsdir"`
	// VOMSTargets are this service's host names for ACs with targets.
	VOMSTargets []string `toml:"voms_targets"`
	// VOMSRequired refuses a certificate without verified VOMS attributes
	// (XrdSecgsi's -vomsat:require). Needs vomsdir. Default false.
	VOMSRequired bool `toml:"voms_required"`
	// CRL is how client certificates (https and gsi) are checked against
	// their CA's revocation list, XrdSecgsi's -crl levels: "ignore", "try"
	// (default: a CA's CRL is used when there is one; a revoked
	// certificate is refused; a CRL that does not verify fails its CA),
	// "use" (every CA must have a CRL) or "require" (and it must not have
	// expired).
	CRL string `toml:"crl"`
	// CRLDirs hold the CRL files (*.r0, as fetch-crl writes them beside
	// the CA files). Default: the directories of ca_paths.
	CRLDirs []string `toml:"crl_dirs"`
	// CRLRefresh is how often the CRL files are read again (also on
	// SIGHUP). Default 24h, as XRootD.
	CRLRefresh Duration `toml:"crl_refresh"`
	// Audiences are the token "aud" values this cache accepts (its URLs,
	// or "https://wlcg.cern.ch/jwt/v1/any"), for issuers without their own.
	Audiences []string `toml:"audiences"`
	// ClockSkew tolerates clock differences on token times and on the
	// expiry of a session's credential (re-checked at every request).
	// Default 60s.
	ClockSkew Duration `toml:"clock_skew"`
	// Issuers are the trusted token issuers ([[security.issuer]]).
	Issuers []IssuerConfig `toml:"issuer"`
	// Rules are the authorization rules ([[security.rule]]). Empty: every
	// client may read and fetch everything (a cache without security).
	Rules []AuthzRule `toml:"rule"`
	// Authorize says that requests must be authorized (XRootD's
	// ofs.authorize, set by from-xcache when the XCache had it): check and
	// serve then refuse a config without rules, or whose rules let anyone
	// read everywhere. Default false.
	Authorize bool `toml:"authorize"`
	// AllowHosts lists the client addresses that may connect (root:// and
	// HTTP): an IP address, a CIDR block ("10.0.0.0/8"), a host name, or a
	// name with one * anywhere, as XRootD's xrd.allow ("*.site.example",
	// ".site.example", "wn*.t2.site.example"), matched against the
	// client's reverse DNS name, confirmed forward. Others are
	// disconnected at once. Default empty: every address may connect.
	AllowHosts []string `toml:"allow_hosts"`
	// GridMap is a grid-mapfile ("DN" name per line) naming certificate
	// subjects for the user:NAME principal (XRootD's http.gridmap and gsi
	// -gridmap). Re-read on SIGHUP. Default "": none.
	GridMap string `toml:"gridmap"`
	// GridMapRequired refuses a client certificate whose subject the grid
	// map does not name (XrdHttp's "http.gridmap FILE required"). Default
	// false.
	GridMapRequired bool `toml:"gridmap_required"`
	// HTTPClientAuth is whether HTTPS asks clients for a certificate:
	// "request" (default when ca_paths is set) or "off" (XrdHttp's
	// http.tlsclientauth off: certificates play no part over HTTPS).
	HTTPClientAuth string `toml:"http_client_auth"`
	// DenyHTTPListing refuses directory listings over HTTP (PROPFIND with
	// depth, GET of a directory), as XrdHttp's http.listingdeny. Default
	// false.
	DenyHTTPListing bool `toml:"deny_http_listing"`

	// OriginTokenFile is a file holding the token the cache presents to
	// origins (HTTP Authorization header, root:// ztn), re-read when it
	// changes. Default "": none.
	OriginTokenFile string `toml:"origin_token_file"`
	// OriginCert and OriginKey are the cache's client certificate (or
	// proxy: both may name the same file) for https:// origins, and its
	// proxy for root:// origins that ask for gsi (an RSA key).
	OriginCert string `toml:"origin_cert"`
	OriginKey  string `toml:"origin_key"`
	// OriginCAPaths verify https:// and roots:// origins. Default empty:
	// the system pool.
	OriginCAPaths []string `toml:"origin_ca_paths"`
}

// IssuerConfig is one [[security.issuer]].
type IssuerConfig struct {
	// Issuer is the exact "iss" of the tokens. Required.
	Issuer string `toml:"issuer"`
	// Audiences override security.audiences for this issuer.
	Audiences []string `toml:"audiences"`
	// JWKSFile holds the issuer's keys; default "": fetched from the
	// issuer (jwks_url, or discovered at /.well-known/openid-configuration).
	JWKSFile string `toml:"jwks_file"`
	JWKSURL  string `toml:"jwks_url"`
	// BasePath is where the issuer's scope paths live. Default "/".
	BasePath string `toml:"base_path"`
	// RestrictedPaths, if set, bound what the issuer's tokens may grant:
	// a scope reaches only into these paths (XrdAccSciTokens'
	// restricted_path). Default empty: no bound beyond base_path.
	RestrictedPaths []string `toml:"restricted_paths"`
	// IgnoreScopes: the issuer's storage scopes grant nothing (its tokens
	// still name their issuer and groups); IgnoreGroups: its wlcg.groups
	// count for nothing. XrdAccSciTokens' authorization_strategy without
	// capability, without group. Default false.
	IgnoreScopes bool `toml:"ignore_scopes"`
	IgnoreGroups bool `toml:"ignore_groups"`
}

// AuthzRule is one [[security.rule]].
type AuthzRule struct {
	// Path is the namespace prefix; the longest matching rule applies.
	Path string `toml:"path"`
	// Match is how Path covers a request: "component" (default: Path and
	// the paths below it) or "prefix" (every path starting with Path as a
	// string, as an XRootD authdb path: "/store" also covers "/store2").
	Match string `toml:"match"`
	// Read and Fetch list principals (docs/security.md): who may read, and
	// who may make the cache download from the origin (default: as Read).
	Read  []string `toml:"read"`
	Fetch []string `toml:"fetch"`
	// Deny lists principals whose rights the rule takes away whatever Read
	// and Fetch grant (XRootD's negative rights, "u alice /store -rl"); a
	// token whose scope grants the path is decided by its scope first.
	// Default empty.
	Deny []string `toml:"deny"`
}

// Enabled reports whether any security feature is configured.
func (s *SecurityConfig) Enabled() bool {
	return s.TLSCert != "" || len(s.Issuers) > 0 || len(s.CAPaths) > 0 || len(s.Rules) > 0 || s.GSI
}

// validate appends the problems of the [security] section to errs.
func (s *SecurityConfig) validate(bad func(key string, val any, allowed string)) {
	if (s.TLSCert == "") != (s.TLSKey == "") {
		bad("security.tls_cert/tls_key", fmt.Sprintf("%q/%q", s.TLSCert, s.TLSKey), "give both or neither")
	}
	if s.RequireTLS && s.TLSCert == "" {
		bad("security.require_tls", true, "needs security.tls_cert and tls_key")
	}
	if s.RequireAuth && len(s.Issuers) == 0 && !s.GSI {
		bad("security.require_auth", true, "needs at least one [[security.issuer]] or gsi = true")
	}
	if (s.GSICert == "") != (s.GSIKey == "") {
		bad("security.gsi_cert/gsi_key", fmt.Sprintf("%q/%q", s.GSICert, s.GSIKey), "give both or neither")
	}
	if s.GSI && s.GSICert == "" && s.TLSCert == "" {
		bad("security.gsi", true, "needs a host certificate: security.gsi_cert and gsi_key, or tls_cert and tls_key")
	}
	if s.GSI && len(s.CAPaths) == 0 {
		bad("security.gsi", true, "needs security.ca_paths to verify the clients' proxies")
	}
	if s.VOMSDir != "" && len(s.CAPaths) == 0 {
		bad("security.vomsdir", s.VOMSDir, "needs security.ca_paths (VOMS attributes come with client certificates)")
	}
	switch s.CRL {
	case "", "ignore", "try", "use", "require":
	default:
		bad("security.crl", fmt.Sprintf("%q", s.CRL), `"ignore", "try", "use" or "require" (XrdSecgsi's -crl:0 to 3)`)
	}
	if s.VOMSRequired && s.VOMSDir == "" {
		bad("security.voms_required", true, "needs security.vomsdir")
	}
	if s.CRLRefresh < 0 {
		bad("security.crl_refresh", s.CRLRefresh, "a positive duration")
	}
	if s.ClockSkew < 0 || time.Duration(s.ClockSkew) > 10*time.Minute {
		bad("security.clock_skew", s.ClockSkew, "0s to 10m")
	}
	for i, is := range s.Issuers {
		key := fmt.Sprintf("security.issuer[%d]", i)
		if is.Issuer == "" {
			bad(key+".issuer", `""`, "required: the tokens' iss")
		}
		if len(is.Audiences) == 0 && len(s.Audiences) == 0 {
			bad(key+".audiences", "[]", "list the audiences this cache accepts here or in security.audiences")
		}
		if is.JWKSFile == "" && !strings.HasPrefix(is.Issuer, "https://") && !strings.HasPrefix(is.JWKSURL, "https://") {
			bad(key+".jwks_file", `""`, "keys are fetched only over https: give jwks_file, an https jwks_url or an https issuer")
		}
	}
	for i, is := range s.Issuers {
		for _, rp := range is.RestrictedPaths {
			if !strings.HasPrefix(rp, "/") {
				bad(fmt.Sprintf("security.issuer[%d].restricted_paths", i), fmt.Sprintf("%q", rp), "absolute namespace paths")
			}
		}
	}
	open := len(s.Rules) > 0
	for i, r := range s.Rules {
		key := fmt.Sprintf("security.rule[%d]", i)
		if !strings.HasPrefix(r.Path, "/") {
			bad(key+".path", fmt.Sprintf("%q", r.Path), "an absolute namespace path")
		}
		if len(r.Read) == 0 {
			bad(key+".read", "[]", `who may read: e.g. ["anonymous"], ["vo:cms", "scope"], or ["none"]`)
		}
		switch r.Match {
		case "", "component", "prefix":
		default:
			bad(key+".match", fmt.Sprintf("%q", r.Match), `"component" or "prefix"`)
		}
		anyone := false
		for _, p := range r.Read {
			anyone = anyone || p == "anonymous" || p == "*"
		}
		open = open && anyone && len(r.Deny) == 0
	}
	if s.Authorize && (len(s.Rules) == 0 || open) {
		bad("security.authorize", true, "requests must be authorized, but no [[security.rule]] restricts anything (every rule lets anyone read): write the rules the XCache's authorization had")
	}
	for _, h := range s.AllowHosts {
		if err := CheckHostPattern(h); err != nil {
			bad("security.allow_hosts", fmt.Sprintf("%q", h), err.Error())
		}
	}
	if s.GridMapRequired && s.GridMap == "" {
		bad("security.gridmap_required", true, "needs security.gridmap")
	}
	if s.GridMap != "" && len(s.CAPaths) == 0 {
		bad("security.gridmap", s.GridMap, "needs security.ca_paths (the grid map names client certificates)")
	}
	switch s.HTTPClientAuth {
	case "", "request", "off":
	default:
		bad("security.http_client_auth", fmt.Sprintf("%q", s.HTTPClientAuth), `"request" or "off"`)
	}
	if (s.OriginCert == "") != (s.OriginKey == "") {
		bad("security.origin_cert/origin_key", fmt.Sprintf("%q/%q", s.OriginCert, s.OriginKey), "give both or neither (a proxy file may be both)")
	}
}

// LimitsConfig is the [limits] section: what clients may hold on the
// front ends. A zero value means the front end's default (in brackets).
type LimitsConfig struct {
	// MaxConnections bounds the client connections served at once, root://
	// and HTTP together; clients over it are told to come back (root://
	// kXR_wait, HTTP 503 with Retry-After) instead of waiting for
	// descriptors the process does not have. 0: the descriptor budget's
	// share, about a third of RLIMIT_NOFILE (docs/deployment.md); -1: no
	// bound [0].
	MaxConnections int `toml:"max_connections"`
	// MaxConnectionsPerClient bounds the connections of one client at
	// once (an IPv4 address, an IPv6 prefix of IPv6ClientPrefix bits),
	// root:// and HTTP each; clients over it are told to come back as over
	// MaxConnections. Raise it where worker nodes reach the cache through
	// one NAT address; -1: no bound [1024].
	MaxConnectionsPerClient int `toml:"max_connections_per_client"`
	// IPv6ClientPrefix is the prefix length of the IPv6 addresses counted
	// as one client by MaxConnectionsPerClient: a host may take any address
	// of its /64 [64]; 128 counts each address apart.
	IPv6ClientPrefix int `toml:"ipv6_client_prefix"`
	// MaxRequestsPerConnection bounds root:// requests in progress on one
	// connection; the server then stops reading from it [64].
	MaxRequestsPerConnection int `toml:"max_requests_per_connection"`
	// MaxReadVSegments and MaxReadVSegmentSize bound one kXR_readv
	// (kXR_ArgTooLong beyond) [1024, 2097136].
	MaxReadVSegments    int  `toml:"max_readv_segments"`
	MaxReadVSegmentSize Size `toml:"max_readv_segment_size"`
	// MaxRequestBody bounds a root:// request's data [64K].
	MaxRequestBody Size `toml:"max_request_body"`
	// HandshakeTimeout bounds root:// connect-to-login (slowloris) [30s];
	// IdleTimeout closes root:// connections without open files [30m].
	HandshakeTimeout Duration `toml:"handshake_timeout"`
	IdleTimeout      Duration `toml:"idle_timeout"`
	// HTTPHeaderTimeout bounds reading HTTP request headers [10s];
	// HTTPIdleTimeout closes idle keep-alive connections [2m].
	HTTPHeaderTimeout Duration `toml:"http_header_timeout"`
	HTTPIdleTimeout   Duration `toml:"http_idle_timeout"`
	// HTTPMaxHeaderBytes bounds HTTP request headers [256K].
	HTTPMaxHeaderBytes Size `toml:"http_max_header_bytes"`
}

func (l *LimitsConfig) validate(bad func(key string, val any, allowed string)) {
	for _, v := range []struct {
		key string
		val int64
	}{
		{"limits.max_requests_per_connection", int64(l.MaxRequestsPerConnection)},
		{"limits.max_readv_segments", int64(l.MaxReadVSegments)},
		{"limits.max_readv_segment_size", int64(l.MaxReadVSegmentSize)},
		{"limits.max_request_body", int64(l.MaxRequestBody)},
		{"limits.handshake_timeout", int64(l.HandshakeTimeout)},
		{"limits.idle_timeout", int64(l.IdleTimeout)},
		{"limits.http_header_timeout", int64(l.HTTPHeaderTimeout)},
		{"limits.http_idle_timeout", int64(l.HTTPIdleTimeout)},
		{"limits.http_max_header_bytes", int64(l.HTTPMaxHeaderBytes)},
	} {
		if v.val < 0 {
			bad(v.key, v.val, "must not be negative (0: the default)")
		}
	}
	if l.MaxConnections < -1 {
		bad("limits.max_connections", l.MaxConnections, "-1 (no bound), 0 (the descriptor budget's share) or a number of connections")
	}
	if l.IPv6ClientPrefix < 0 || l.IPv6ClientPrefix > 128 {
		bad("limits.ipv6_client_prefix", l.IPv6ClientPrefix, "a prefix length from 1 to 128 (0: 64)")
	}
	if l.MaxReadVSegments > 1024 {
		bad("limits.max_readv_segments", l.MaxReadVSegments, "at most 1024, the protocol's limit")
	}
	if l.MaxRequestBody != 0 && l.MaxRequestBody < 16<<10 {
		bad("limits.max_request_body", l.MaxRequestBody, "0 (default) or at least 16K (a full readv list)")
	}
}

// CheckHostPattern reports what is wrong with an allow_hosts entry.
func CheckHostPattern(h string) error {
	switch {
	case h == "":
		return fmt.Errorf("empty")
	case strings.ContainsAny(h, " \t/") && !strings.Contains(h, "/"):
		return fmt.Errorf("one address, CIDR block, host or domain per entry")
	case strings.Contains(h, "/"):
		if _, _, err := net.ParseCIDR(h); err != nil {
			return fmt.Errorf("not a CIDR block: %w", err)
		}
	case strings.HasPrefix(h, "+"):
		return fmt.Errorf("%s is a netgroup: hepcache does not resolve netgroups; list its hosts, domains or address blocks", h)
	case strings.Count(h, "*") > 1:
		return fmt.Errorf("one * at most, as XRootD's host patterns (wn*.site.example)")
	}
	return nil
}
