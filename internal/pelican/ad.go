package pelican

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/nsauth"
)

// advertisement is the body of a cache's ad: the fields of Pelican's
// OriginAdvertise with its ServerBaseAd (server_structs/director.go),
// which the director decodes for origins and caches alike.
type advertisement struct {
	Name         string    `json:"name"`
	StartTime    int64     `json:"startTime"`
	InstanceID   string    `json:"instanceID"`
	GenerationID uint64    `json:"generationID"`
	Version      string    `json:"version"`
	Expiration   time.Time `json:"expiry"`

	ServerID       string `json:"serverId"`
	RegistryPrefix string `json:"registry-prefix"`
	DataURL        string `json:"data-url"`
	WebURL         string `json:"web-url,omitempty"`
	// Coordinate is where the cache says it is (Pelican's GeoLocation),
	// which the director prefers to its GeoIP guess; nil: not said.
	Coordinate *coordinate `json:"coordinate,omitempty"`
	// Caps are left empty, as a Pelican cache leaves them
	// (cache/advertise.go CreateAdvertisement).
	Caps       capabilities      `json:"capabilities"`
	Namespaces []json.RawMessage `json:"namespaces"`
	Issuer     []json.RawMessage `json:"token-issuer"`
	// StorageType "" is posix for the director, as for a Pelican cache.
	StorageType         string            `json:"storageType"`
	DisableDirectorTest bool              `json:"directorTest"`
	Downtimes           []json.RawMessage `json:"downtimes"`
	RequiredFeatures    []string          `json:"requiredFeatures"`
	// Now lets the director correct the expiry for clock skew.
	Now    time.Time `json:"now"`
	Status string    `json:"status"`
}

// coordinate is server_structs.Coordinate as Pelican's servers encode it
// (no JSON tags: Go's field names).
type coordinate struct {
	Lat            float64 `json:"Lat"`
	Long           float64 `json:"Long"`
	AccuracyRadius uint16  `json:"AccuracyRadius"`
	Source         string  `json:"Source"`
	FromTTLCache   bool    `json:"FromTTLCache"`
}

// parseCoordinate reads "lat,lon" as Pelican's GeoLocation does
// (utils.ParseCoordinateStr).
func parseCoordinate(s string) (*coordinate, error) {
	la, lo, ok := strings.Cut(s, ",")
	lat, err1 := strconv.ParseFloat(strings.TrimSpace(la), 64)
	long, err2 := strconv.ParseFloat(strings.TrimSpace(lo), 64)
	switch {
	case !ok || err1 != nil || err2 != nil:
		return nil, fmt.Errorf("coordinates %q: want \"lat,lon\" in decimal degrees", s)
	case lat < -90 || lat > 90 || long < -180 || long > 180:
		return nil, fmt.Errorf("coordinates %q: latitude within ±90, longitude within ±180", s)
	}
	return &coordinate{Lat: lat, Long: long, Source: "declared"}, nil
}

// capabilities are a namespace's or server's capabilities; the JSON names
// are Pelican's, kept upper-case for compatibility.
type capabilities struct {
	PublicReads bool `json:"PublicRead"`
	Reads       bool `json:"Read"`
	Writes      bool `json:"Write"`
	Listings    bool `json:"Listing"`
	DirectReads bool `json:"FallBackRead"`
	Copies      bool `json:"Copies"`
}

// namespaceAd is the part of a director's namespace entry that hepcache
// reads (server_structs NamespaceAd). URLs are encoded as Go's url.URL
// struct, as Pelican's json encoding of it gives.
type namespaceAd struct {
	Caps    capabilities  `json:"Caps"`
	Path    string        `json:"path"`
	Issuers []tokenIssuer `json:"token-issuer"`
}

type tokenIssuer struct {
	BasePaths       []string `json:"base-paths"`
	RestrictedPaths []string `json:"restricted-paths"`
	Issuer          url.URL  `json:"issuer"`
}

// namespaceList is the director's list as received (each entry kept raw,
// so that the ad repeats it as the director wrote it) with what hepcache
// understands of it.
type namespaceList struct {
	raw    []json.RawMessage
	parsed []namespaceAd
}

// parseNamespaces decodes a director's list, keeping the entries under
// permitted (all when empty). Entries that do not decode are reported.
func parseNamespaces(raw []json.RawMessage, permitted []string) (namespaceList, error) {
	var out namespaceList
	var bad []string
	for _, r := range raw {
		var n namespaceAd
		if err := json.Unmarshal(r, &n); err != nil || !strings.HasPrefix(n.Path, "/") {
			bad = append(bad, strings.TrimSpace(string(r[:min(len(r), 80)])))
			continue
		}
		n.Path = strings.TrimRight(n.Path, "/")
		if n.Path == "" {
			n.Path = "/"
		}
		if !permittedPath(n.Path, permitted) {
			continue
		}
		out.raw = append(out.raw, r)
		out.parsed = append(out.parsed, n)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("namespace list: %d entries left out that do not decode (first: %s)", len(bad), bad[0])
	}
	return out, nil
}

// permittedPath reports whether ns is one of the permitted prefixes or
// below one (the director's monitoring namespace always is: its tests run
// through every cache).
func permittedPath(ns string, permitted []string) bool {
	if len(permitted) == 0 || strings.HasPrefix(ns+"/", monitoringNS+"/") {
		return true
	}
	for _, p := range permitted {
		p = strings.TrimRight(p, "/")
		if ns == p || strings.HasPrefix(ns, p+"/") {
			return true
		}
	}
	return false
}

// monitoringNS is the director's own namespace of test objects
// (server_utils MonitoringBaseNs).
const monitoringNS = "/pelican/monitoring"

// authz turns the list into nsauth's namespaces.
func (l namespaceList) authz() []nsauth.Namespace {
	out := make([]nsauth.Namespace, 0, len(l.parsed))
	for _, n := range l.parsed {
		ns := nsauth.Namespace{Path: n.Path, PublicRead: n.Caps.PublicReads}
		for _, is := range n.Issuers {
			ns.Issuers = append(ns.Issuers, nsauth.Issuer{URL: is.Issuer.String(), BasePaths: is.BasePaths, RestrictedPaths: is.RestrictedPaths})
		}
		out = append(out, ns)
	}
	return out
}

// newInstanceID is a hex-encoded random UUID (version 4), as a Pelican
// server names its instance.
func newInstanceID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}

// newNonce is a 32-byte random nonce in hex (utils.GenerateNonce).
func newNonce() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("nonce: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// newServerID is a server id as the registry stores it: 7 characters of
// [a-z0-9] (server_structs.GenerateServerID).
func newServerID() string {
	const charset = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [7]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = charset[int(b[i])%len(charset)]
	}
	return string(b[:])
}
