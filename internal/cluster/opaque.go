package cluster

import (
	"net"
	"strings"
)

// Opaque keys hepcache adds to requests it sends within a cluster. They
// travel as XRootD CGI (root://) or as the query string (HTTP).
const (
	// KeyRouted marks a request a node already routed (redirected or
	// proxied) to this one: it is served here, never routed again, so two
	// nodes with different views cannot bounce a client between them.
	KeyRouted = "hc.rd"
	// KeyPeer marks a peer lookup: answer only from the local cache, with
	// the file named by its cache key (KeyOrigin and the path after name
	// mapping), else "not found". It never triggers an origin fetch.
	KeyPeer = "hc.peer"
	// KeyOrigin is the cache key's origin in a peer lookup.
	KeyOrigin = "hc.origin"
	// keyRoutedIndex is the rank of the node a request was sent to (absent
	// for the owner): a client that comes back after failing there goes
	// to the next one.
	keyRoutedIndex = "hc.rdi"
	// keyTried is XrdCl's list of hosts that failed this request; it comes
	// back to the redirector (a manager) after an error at a data server.
	keyTried = "tried"
)

// opaqueGet returns the value of key in an XRootD opaque string
// ("a=1&b=2"); values are not unescaped (XRootD does not escape them).
func opaqueGet(opaque, key string) (string, bool) {
	for opaque != "" {
		var kv string
		kv, opaque, _ = strings.Cut(opaque, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k == key {
			return v, true
		}
	}
	return "", false
}

// opaqueValue returns the value of key in opaque, or "".
func opaqueValue(opaque, key string) string {
	v, _ := opaqueGet(opaque, key)
	return v
}

// opaqueSet returns opaque with key=value, replacing an earlier value.
func opaqueSet(opaque, key, value string) string {
	var out []string
	for _, kv := range strings.Split(opaque, "&") {
		if kv == "" {
			continue
		}
		if k, _, _ := strings.Cut(kv, "="); k == key {
			continue
		}
		out = append(out, kv)
	}
	return strings.Join(append(out, key+"="+value), "&")
}

// tried returns the host names listed in XrdCl's tried= CGI.
func tried(opaque string) map[string]bool {
	v, ok := opaqueGet(opaque, keyTried)
	if !ok {
		return nil
	}
	out := map[string]bool{}
	for _, h := range strings.Split(v, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out[strings.ToLower(strings.Trim(h, "[]"))] = true
		}
	}
	return out
}

// hostOf returns the lower-case host of "host:port".
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return strings.ToLower(addr)
	}
	return strings.ToLower(h)
}
