package xcacheconf

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// XRootD's privilege bits (XrdAccPrivs.hh, 5.5.3) that a cache's clients
// use: open for reading and directory listing need privRead, stat and
// locate privLookup.
const (
	privRead   = 0x20
	privLookup = 0x08
	privAll    = 0x7f
)

// privLetters are the letters of an authdb privilege string and their bits
// (XrdAccPrivSpec).
var privLetters = map[byte]int{'a': privAll, 'd': 0x01, 'i': 0x02, 'k': 0x04, 'l': privLookup, 'n': 0x10, 'r': privRead, 'w': 0x40}

// parsePrivs reads a privilege string as XRootD does: letters add to the
// positive set until a '-', after which they add to the negative one
// ("a-r": everything but read; "-rl": read and lookup taken away). A
// second '-' or an unknown letter makes the authdb invalid.
func parsePrivs(s string) (pos, neg int, err error) {
	cur := &pos
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			if cur == &neg {
				return 0, 0, fmt.Errorf("invalid privileges %q: a second '-'", s)
			}
			cur = &neg
			continue
		}
		b, ok := privLetters[s[i]]
		if !ok {
			return 0, 0, fmt.Errorf("invalid privileges %q: unknown letter %q (XRootD knows a d i k l n r w and -)", s, s[i])
		}
		*cur |= b
	}
	return pos, neg, nil
}

// capability is one "path privileges" pair of an authdb line.
type capability struct {
	path     string
	pos, neg int
}

// identity is one line of an authdb: who it names and its capabilities in
// the order written. XRootD applies, for each identity that matches a
// client, the first capability whose path is a string prefix of the
// request's (XrdAccCapability::Privs), then grants what all of them grant
// less what any of them takes away (XrdAccAccess::Access).
type identity struct {
	// principal is the hepcache principal matching whom XRootD's line
	// matches, "" when there is none (hosts, netgroups, unix groups...).
	principal string
	// what names the identity for messages ("u alice", "h *.cern.ch").
	what, where string
	// why says why principal is "" (what hepcache cannot match).
	why  string
	caps []capability
}

// first returns the capability XRootD applies to path p for this
// identity, or nil.
func (id *identity) first(p string) *capability {
	for i := range id.caps {
		if strings.HasPrefix(p, id.caps[i].path) {
			return &id.caps[i]
		}
	}
	return nil
}

// authdb is an XRootD authorization file (acc.authdb) as XRootD 5.5.3
// reads it (XrdAccConfig::ConfigDBrec, XrdAccAuthFile).
type authdb struct {
	ids   []identity
	users []string // user names granted (user:NAME needs a grid map)
	// wider lists lines hepcache cannot carry without opening access.
	wider []string
}

// dnHash is the name XRootD's gsi gives a certificate the grid map does not
// name (the subject's hash).
var dnHash = regexp.MustCompile(`^[0-9a-f]{8}\.0$`)

// readAuthdb reads an XRootD authorization file. A line is "idtype id
// path privs [path privs]...": u (user; "u *" everyone), g (group), o
// (organisation), r (role), h (host), n (netgroup), t (template), = (a
// compound id), x and s (rules for compound ids). What makes xrootd refuse
// the file (an unknown id type, bad privileges, a duplicate id, a missing
// template) fails.
func readAuthdb(name string) (*authdb, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("acc.authdb: %w (xrootd refuses to start without it)", err)
	}
	defer f.Close()
	db := &authdb{}
	templates := map[string][]capability{}
	seen := map[string]bool{}
	var errs []string
	sc := bufio.NewScanner(f)
	n, start, acc := 0, 0, ""
	for sc.Scan() {
		n++
		line := sc.Text()
		if acc == "" {
			start = n
		}
		// A record is one line; a final '\' continues it (XrdOucStream).
		if t := strings.TrimRight(line, " \t"); strings.HasSuffix(t, "\\") {
			acc += strings.TrimSuffix(t, "\\") + " "
			continue
		}
		line, acc = acc+line, ""
		w := strings.Fields(line)
		if len(w) == 0 || strings.HasPrefix(w[0], "#") {
			continue
		}
		where := fmt.Sprintf("%s:%d", filepath.Base(name), start)
		fail := func(format string, args ...any) {
			errs = append(errs, where+": "+fmt.Sprintf(format, args...))
		}
		if len(w[0]) != 1 || !strings.Contains("ghsnortux=", w[0]) {
			fail("invalid id type %q", w[0])
			continue
		}
		if len(w) < 2 {
			fail("record name missing after %q", w[0])
			continue
		}
		kind, name := w[0], w[1]
		if kind == "=" {
			// A compound id: its x and s rules below are refused.
			continue
		}
		key := kind + " " + name
		if seen[key] {
			fail("duplicate rule for id %s (xrootd refuses the file)", key)
			continue
		}
		seen[key] = true
		id := identity{what: key, where: where}
		bad := false
		for i := 2; i < len(w); i++ {
			p := w[i]
			if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "\\") {
				// Not a path: a template, whose capabilities XRootD
				// tries at this place, in their order.
				tc, ok := templates[p]
				if !ok {
					fail("missing template %q", p)
					bad = true
					break
				}
				id.caps = append(id.caps, tc...)
				continue
			}
			p = strings.TrimPrefix(p, "\\")
			if i+1 >= len(w) {
				fail("privileges missing after %s", p)
				bad = true
				break
			}
			i++
			pos, neg, err := parsePrivs(w[i])
			if err != nil {
				fail("%v", err)
				bad = true
				break
			}
			id.caps = append(id.caps, capability{path: p, pos: pos, neg: neg})
		}
		if bad {
			continue
		}
		if len(id.caps) == 0 {
			fail("no capabilities specified for %s", key)
			continue
		}
		switch kind {
		case "t":
			templates[name] = id.caps
			continue
		case "u":
			switch {
			case name == "*":
				id.principal = "anonymous"
			case name == "=":
				id.why = "each user's own path (@=) is not expressed in hepcache's rules"
			case dnHash.MatchString(name):
				id.why = "the name gsi gives a certificate the grid map does not name; hepcache names certificates by DN (dn:) or grid-map name (user:)"
			case strings.HasPrefix(name, "/"):
				id.why = "a DN as a user name (gsi names a certificate by its DN only with -gmapopt:10 or 11); hepcache's user: principals are grid-map names"
			default:
				id.principal = "user:" + name
				db.users = appendNew(db.users, name)
			}
		case "g":
			if strings.HasPrefix(name, "/") {
				id.principal = "group:" + name
			} else {
				id.why = "a Unix group (of the mapped user name): hepcache matches VOMS and token groups (/vo/group) only"
			}
		case "o":
			id.principal = "org:" + name
		case "r":
			id.principal = "role:" + name
		case "h":
			id.why = "hepcache authorizes identities, not hosts (security.allow_hosts limits who may connect at all)"
		case "n":
			id.why = "hepcache authorizes identities, not netgroups"
		case "s":
			id.why = "rules of compound ids (= lines) are not expressed in hepcache's rules"
		case "x":
			// An exclusive rule replaces every other line for whom it
			// applies: it can take rights away whatever it grants.
			db.wider = append(db.wider, fmt.Sprintf("%s: x %s: an exclusive rule of a compound id, which replaces every other line for the clients it applies to, is not expressed in hepcache's rules", where, name))
			continue
		}
		db.ids = append(db.ids, id)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("acc.authdb %s: %w", name, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("acc.authdb %s: xrootd refuses this file:\n  - %s", name, strings.Join(errs, "\n  - "))
	}
	return db, nil
}

// authRule is one translated [[security.rule]], a prefix rule.
type authRule struct {
	path       string
	read, deny []string
}

// rules turns the authdb into hepcache's longest-prefix rules with the same
// decisions on reading (XRootD's r: open, read, list): one rule per path
// the authdb, the exports or the token issuers name (paths), each listing
// whom XRootD's first applicable capability per identity grants read and
// takes it from. This is exact because, for a request, the longest such
// path below it has the same applicable capabilities as the request.
//
// widen receives what cannot be carried without opening access; narrow
// what hepcache will refuse although XRootD allowed it.
func (db *authdb) rules(paths []string, widen, narrow func(string)) []authRule {
	all := map[string]bool{}
	for _, p := range paths {
		all[p] = true
	}
	for _, id := range db.ids {
		for _, c := range id.caps {
			all[c.path] = true
		}
	}
	sorted := make([]string, 0, len(all))
	for p := range all {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	var out []authRule
	for _, b := range sorted {
		r := authRule{path: b}
		for i := range db.ids {
			id := &db.ids[i]
			c := id.first(b)
			if c == nil {
				continue
			}
			switch {
			case id.principal == "" && c.neg&privRead != 0:
				widen(fmt.Sprintf("%s %s takes read rights on %s away from %s: %s, so they would keep what other lines grant", id.where, id.what, c.path, id.what, id.why))
			case id.principal == "" && c.pos&privRead != 0 && c.neg&privRead == 0:
				narrow(fmt.Sprintf("%s %s grants read on %s: %s: not carried over, its clients are refused unless another rule grants them", id.where, id.what, c.path, id.why))
			case c.pos&privRead != 0 && c.neg&privRead == 0:
				r.read = appendNew(r.read, id.principal)
			}
			if id.principal != "" && c.neg&privRead != 0 {
				r.deny = appendNew(r.deny, id.principal)
			}
		}
		out = append(out, r)
	}
	return out
}
