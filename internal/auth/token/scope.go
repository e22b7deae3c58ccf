package token

import (
	"fmt"
	"path"
	"strings"
)

// Scope is one storage authorization of a token: an operation on a path
// and everything below it.
type Scope struct {
	// Op is "read", "stage", "create" or "modify" (WLCG storage.* scopes;
	// SciTokens "read" is "read" and "write" is "modify").
	Op string
	// Path is the absolute namespace path the scope covers, after the
	// issuer's base path was applied; "/" covers everything.
	Path string
}

// String renders s in the WLCG form ("storage.read:/store").
func (s Scope) String() string { return "storage." + s.Op + ":" + s.Path }

// Covers reports whether the scope grants op on p (a clean absolute path):
// the scope path must equal p or be a parent directory of it, so
// "/store" covers "/store/f" but not "/storefoo".
func (s Scope) Covers(op, p string) bool {
	return s.Op == op && PathCovers(s.Path, p)
}

// PathCovers reports whether prefix is p or a parent directory of p. Both
// must be clean absolute paths.
func PathCovers(prefix, p string) bool {
	if prefix == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == prefix || strings.HasPrefix(p, prefix) && p[len(prefix)] == '/'
}

// wlcgOps maps the WLCG storage scope names to operations.
var wlcgOps = map[string]string{
	"storage.read":   "read",
	"storage.stage":  "stage",
	"storage.create": "create",
	"storage.modify": "modify",
}

// sciOps maps SciTokens scope names to operations.
var sciOps = map[string]string{
	"read":  "read",
	"write": "modify",
}

// parseScopes parses the space-separated "scope" claim into storage scopes
// under basePath; scopes of other kinds (openid, compute.*) are ignored.
// A storage scope with a malformed path is an error: a token that means
// something we cannot read is refused rather than half understood.
func parseScopes(claim, basePath string) ([]Scope, error) {
	var out []Scope
	for _, s := range strings.Fields(claim) {
		name, p, hasPath := strings.Cut(s, ":")
		op, wlcg := wlcgOps[name]
		if !wlcg {
			op = sciOps[name]
		}
		if op == "" {
			continue
		}
		if !hasPath {
			if wlcg {
				return nil, fmt.Errorf("scope %q: a WLCG storage scope needs a path", s)
			}
			p = "/" // SciTokens: "read" alone means the whole namespace
		}
		clean, err := cleanScopePath(p)
		if err != nil {
			return nil, fmt.Errorf("scope %q: %w", s, err)
		}
		out = append(out, Scope{Op: op, Path: joinBase(basePath, clean)})
	}
	return out, nil
}

// cleanScopePath validates a scope path: absolute, no "..", no NUL.
func cleanScopePath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q is not absolute", p)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path contains NUL")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("path %q contains '..'", p)
		}
	}
	return path.Clean(p), nil
}

// joinBase puts a scope path under the issuer's base path.
func joinBase(base, p string) string {
	if base == "" || base == "/" {
		return p
	}
	return path.Join(base, p)
}

// restrict bounds scopes to the restricted paths: a scope inside one is
// kept, a scope above some is narrowed to each of them, a scope beside all
// is dropped.
func restrict(scopes []Scope, restricted []string) []Scope {
	var out []Scope
	for _, s := range scopes {
		for _, r := range restricted {
			if PathCovers(r, s.Path) {
				out = append(out, s)
				break
			}
			if PathCovers(s.Path, r) {
				out = append(out, Scope{Op: s.Op, Path: r})
			}
		}
	}
	return out
}

// otherScopes lists the scopes of the claim that parseScopes does not
// take as storage scopes.
func otherScopes(claim string) []string {
	var out []string
	for _, s := range strings.Fields(claim) {
		name, _, _ := strings.Cut(s, ":")
		if wlcgOps[name] == "" && sciOps[name] == "" {
			out = append(out, s)
		}
	}
	return out
}

// HasScope reports whether the token carries scope s among its other
// (non-storage) scopes, exactly as written.
func (c *Claims) HasScope(s string) bool {
	for _, o := range c.OtherScopes {
		if o == s {
			return true
		}
	}
	return false
}
