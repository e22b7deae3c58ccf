package xcacheconf

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// authdbGrants reads an XRootD authorization file (acc.authdb) and returns,
// per path, the hepcache principals that may read there, with warnings for
// the identities hepcache has no principal for.
//
// A line is "idtype id path privs [path privs]...": u (user), g (group), o
// (organisation, the VO), r (role), h (host), n (netgroup), t (template),
// = (compound). Read rights are "r", "l" with "r", or "a"; a privilege set
// starting with "-" takes rights away, which hepcache's rules cannot say.
func authdbGrants(name string) (map[string][]string, []string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, fmt.Errorf("acc.authdb: %w", err)
	}
	defer f.Close()
	grants := map[string][]string{}
	var warns []string
	sc := bufio.NewScanner(f)
	n, acc := 0, ""
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasSuffix(line, "\\") {
			acc += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, acc = acc+line, ""
		w := strings.Fields(stripComment(line))
		if len(w) < 2 {
			continue
		}
		where := fmt.Sprintf("%s:%d", filepath.Base(name), n)
		var who string
		switch w[0] {
		case "u":
			if w[1] == "*" {
				who = "anonymous"
			} else {
				warns = append(warns, fmt.Sprintf("%s: user %q: hepcache has no unix user names; identities are token subjects, DNs and VOMS attributes (docs/security.md): not mapped", where, w[1]))
			}
		case "g":
			who = "group:" + ensureSlash(w[1])
		case "o":
			who = "vo:" + strings.TrimPrefix(w[1], "/")
		case "r":
			warns = append(warns, fmt.Sprintf("%s: role %q alone: hepcache names roles with their group (fqan:/vo/Role=%s): not mapped", where, w[1], w[1]))
		case "h", "n":
			warns = append(warns, fmt.Sprintf("%s: %s %q: hepcache authorizes identities, not hosts: not mapped", where, map[string]string{"h": "host", "n": "netgroup"}[w[0]], w[1]))
		default:
			warns = append(warns, fmt.Sprintf("%s: identity type %q: not mapped", where, w[0]))
		}
		for i := 2; i+1 < len(w); i += 2 {
			p, privs := w[i], w[i+1]
			if !strings.HasPrefix(p, "/") {
				continue
			}
			if strings.HasPrefix(privs, "-") {
				warns = append(warns, fmt.Sprintf("%s: %s %s takes rights away: hepcache rules only grant; review the [[security.rule]] of %s", where, p, privs, p))
				continue
			}
			if who != "" && (strings.Contains(privs, "r") || strings.Contains(privs, "a")) {
				grants[p] = appendNew(grants[p], who)
			}
		}
	}
	return grants, warns, sc.Err()
}

// issuer is one [Issuer ...] section of a scitokens.cfg.
type issuer struct {
	name, issuer string
	basePaths    []string
	audiences    []string
	extra        []string // keys hepcache has no equivalent for
}

// readSciTokens reads the XrdAccSciTokens configuration: the global
// audiences and each issuer with its base paths.
func readSciTokens(name string) (aud []string, iss []issuer, err error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, fmt.Errorf("scitokens config: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var cur *issuer
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
				aud = append(aud, listValue(v)...)
			} else {
				cur.audiences = append(cur.audiences, listValue(v)...)
			}
		case cur == nil:
		case k == "issuer":
			cur.issuer = v
		case k == "base_path":
			cur.basePaths = append(cur.basePaths, listValue(v)...)
		default:
			cur.extra = append(cur.extra, k)
		}
	}
	return aud, iss, sc.Err()
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
