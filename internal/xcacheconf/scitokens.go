package xcacheconf

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// issuer is one [Issuer ...] section of a scitokens.cfg.
type issuer struct {
	name, issuer    string
	basePaths       []string
	restrictedPaths []string
	audiences       []string
	extra           []string // keys hepcache has no equivalent for
	// strategy is authorization_strategy's value, "" when not set.
	strategy string
	// groupsClaim is groups_claim's value (XRootD >= 5.7), "" when not set.
	groupsClaim string
}

// uses reports whether XRootD authorizes with what of this issuer's tokens
// ("capability", "group", "mapping"): authorization_strategy, defined by
// XRootD 5.7 (all three when not set); XRootD 5.5.3 ignores the key and
// uses all three.
func (is *issuer) uses(what string) bool {
	if is.strategy == "" {
		return true
	}
	for _, w := range strings.Fields(is.strategy) {
		if w == what {
			return true
		}
	}
	return false
}

// sciTokens is what a scitokens.cfg configures.
type sciTokens struct {
	audiences []string
	issuers   []issuer
	// onMissing is [Global] onmissing: what happens when a request has no
	// token or its token does not authorize it: "passthrough" (default:
	// the authorization library chained with ++ decides), "allow" or
	// "deny".
	onMissing string
}

// readSciTokens reads the XrdAccSciTokens configuration: the global
// audiences and each issuer with its base paths.
func readSciTokens(name string) (*sciTokens, error) {
	st := &sciTokens{onMissing: "passthrough"}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("scitokens config: %w (xrootd refuses to start without it)", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var cur *issuer
	var iss []issuer
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			sec := strings.TrimSpace(line[1 : len(line)-1])
			cur = nil
			if strings.HasPrefix(strings.ToLower(sec), "issuer ") {
				iss = append(iss, issuer{name: strings.TrimSpace(sec[7:])})
				cur = &iss[len(iss)-1]
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		switch {
		case k == "audience" || k == "audience_json":
			if cur == nil {
				st.audiences = append(st.audiences, listValue(v)...)
			} else {
				cur.audiences = append(cur.audiences, listValue(v)...)
			}
		case cur == nil && k == "onmissing":
			switch v {
			case "passthrough", "allow", "deny":
				st.onMissing = v
			default:
				return nil, fmt.Errorf("scitokens config %s: onmissing = %q: xrootd refuses the file (passthrough, allow or deny)", name, v)
			}
		case cur == nil:
		case k == "issuer":
			cur.issuer = v
		case k == "base_path":
			cur.basePaths = append(cur.basePaths, listValue(v)...)
		case k == "restricted_path":
			cur.restrictedPaths = append(cur.restrictedPaths, listValue(v)...)
		case k == "authorization_strategy":
			cur.strategy = v
		case k == "groups_claim":
			cur.groupsClaim = v
		default:
			cur.extra = append(cur.extra, k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scitokens config %s: %w", name, err)
	}
	st.issuers = iss
	return st, nil
}

// listValue splits "a, b" or a JSON list of strings.
func listValue(v string) []string {
	v = strings.TrimSpace(v)
	v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.Trim(strings.TrimSpace(s), `"`); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func ensureSlash(s string) string {
	if strings.HasPrefix(s, "/") {
		return s
	}
	return "/" + s
}

func appendNew(l []string, v string) []string {
	for _, x := range l {
		if x == v {
			return l
		}
	}
	return append(l, v)
}
