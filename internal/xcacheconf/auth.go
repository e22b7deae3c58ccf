package xcacheconf

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// authdb is what an XRootD authorization file (acc.authdb) grants and
// takes away, in hepcache's principals.
type authdb struct {
	// grants: per path, the principals that may read there.
	grants map[string][]string
	// denied: per path, who had read rights taken away there ("-rl"); an
	// XRootD negative right wins over every grant at and below its path.
	denied map[string][]string
	// users are the user names granted (user:NAME, which needs a grid map).
	users []string
	warns []string
}

// readAuthdb reads an XRootD authorization file (acc.authdb).
//
// A line is "idtype id path privs [path privs]...": u (user), g (group), o
// (organisation, the VO), r (role), h (host), n (netgroup), t (template),
// = (compound). Read rights are "r", "l" with "r", or "a"; a privilege set
// starting with "-" takes rights away.
func readAuthdb(name string) (*authdb, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("acc.authdb: %w (xrootd refuses to start without it)", err)
	}
	defer f.Close()
	db := &authdb{grants: map[string][]string{}, denied: map[string][]string{}}
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
				who = "user:" + w[1]
				db.users = appendNew(db.users, w[1])
			}
		case "g":
			who = "group:" + ensureSlash(w[1])
		case "o":
			who = "vo:" + strings.TrimPrefix(w[1], "/")
		case "r":
			db.warns = append(db.warns, fmt.Sprintf("%s: role %q alone: hepcache names roles with their group (fqan:/vo/Role=%s): not mapped, its grants are not made", where, w[1], w[1]))
		case "h", "n":
			db.warns = append(db.warns, fmt.Sprintf("%s: %s %q: hepcache authorizes identities, not hosts: not mapped, its grants are not made (security.allow_hosts limits who may connect at all)", where, map[string]string{"h": "host", "n": "netgroup"}[w[0]], w[1]))
		default:
			db.warns = append(db.warns, fmt.Sprintf("%s: identity type %q: not mapped, its grants are not made", where, w[0]))
		}
		for i := 2; i+1 < len(w); i += 2 {
			p, privs := w[i], w[i+1]
			if !strings.HasPrefix(p, "/") {
				continue
			}
			if strings.HasPrefix(privs, "-") {
				// Taken away from whoever the line names, mapped or not:
				// an identity hepcache cannot name still loses the right.
				if strings.ContainsAny(privs, "rla") {
					id := who
					if id == "" {
						id = w[0] + " " + w[1]
					}
					db.denied[p] = appendNew(db.denied[p], id)
				}
				continue
			}
			if who != "" && (strings.Contains(privs, "r") || strings.Contains(privs, "a")) {
				db.grants[p] = appendNew(db.grants[p], who)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("acc.authdb %s: %w", name, err)
	}
	return db, nil
}

// issuer is one [Issuer ...] section of a scitokens.cfg.
type issuer struct {
	name, issuer    string
	basePaths       []string
	restrictedPaths []string
	audiences       []string
	extra           []string // keys hepcache has no equivalent for
}

// readSciTokens reads the XrdAccSciTokens configuration: the global
// audiences and each issuer with its base paths.
func readSciTokens(name string) (aud []string, iss []issuer, err error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, fmt.Errorf("scitokens config: %w (xrootd refuses to start without it)", err)
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
		case k == "restricted_path":
			cur.restrictedPaths = append(cur.restrictedPaths, listValue(v)...)
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
