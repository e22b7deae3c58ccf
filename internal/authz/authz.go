// Package authz decides, per namespace, who may read a file and who may
// make the cache download it from the origin (a miss), from the Subject
// that the authenticators established: a bearer token's scopes and groups,
// an X.509 identity with its VOMS VO, groups and roles, or nobody. The
// longest rule path covering the request decides; within it, a rule's deny
// list takes away what its read list grants, as XRootD's negative rights.
package authz

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/hepcache/hepcache/internal/auth/token"
	"github.com/hepcache/hepcache/internal/auth/voms"
	"github.com/hepcache/hepcache/internal/auth/x509proxy"
)

// Subject is who asks: everything the authenticators learnt about the
// client. The zero Subject is an anonymous client.
type Subject struct {
	// Name identifies the client in logs (token sub@iss, certificate DN,
	// or the login name of an anonymous client).
	Name string
	// Token holds the claims of a verified bearer token, or nil.
	Token *token.Claims
	// X509 holds a verified client certificate chain, or nil.
	X509 *x509proxy.Chain
	// VOMS holds the verified VOMS attributes of X509 (may be empty).
	VOMS []voms.Attributes
	// User is the name the grid map gives X509's subject, or "".
	User string
}

// Authenticated reports whether any credential was verified.
func (s *Subject) Authenticated() bool { return s != nil && (s.Token != nil || s.X509 != nil) }

// String describes the subject for messages ("anonymous client",
// "token alice@https://iss", "certificate /DC=...").
func (s *Subject) String() string {
	switch {
	case s == nil || !s.Authenticated():
		return "anonymous client"
	case s.Token != nil:
		return "token " + s.Token.Name()
	default:
		return "certificate " + s.X509.Subject
	}
}

// Rule says who may do what below a path.
type Rule struct {
	// Path is the namespace prefix the rule covers ("/store/mc"); "/"
	// covers everything.
	Path string
	// Read lists the principals that may read (open, stat, list,
	// checksum). Principals:
	//   anonymous (or *)   everyone, with or without credentials
	//   authenticated      any verified token or certificate
	//   none               nobody
	//   scope[:OP]         a token whose storage scope grants OP (default
	//                      read) on the requested path
	//   issuer:URL         a token from issuer URL
	//   vo:NAME            VOMS VO NAME, or a token group /NAME or below
	//   group:/G           VOMS FQAN group /G, or token group /G
	//   fqan:/G/Role=R     VOMS FQAN with group /G and role R
	//   dn:/DC=...         certificate subject DN
	//   user:NAME          a certificate the grid map names NAME
	//   org:NAME           what XRootD's authdb "o NAME" matches: VOMS VO
	//                      NAME, or a token whose issuer is NAME
	//   role:R             a VOMS FQAN with role R, in any group
	Read []string
	// Deny lists principals whose rights the rule takes away (XRootD's
	// negative rights, "u alice /store -rl"): a subject matching one may
	// neither read nor fetch here, whatever Read and Fetch grant. A token
	// whose storage scope grants the path is decided by the scope alone,
	// before Deny, as XRootD's SciTokens library decides before the authdb
	// it chains to ("ofs.authlib ++"). Empty: nothing is taken away.
	Deny []string
	// Fetch lists who may make the cache fetch from the origin what it
	// does not hold yet. Empty: the same as Read. Others may only read
	// what is already cached. Same principals as Read.
	Fetch []string
	// Prefix makes the rule cover every path that starts with Path as a
	// string, as an XRootD authdb path does ("/store" also covers
	// "/store2/f"; "/store/" covers neither "/store" nor "/store2").
	// Default false: Path and the paths below it, component by component.
	Prefix bool
}

// Config configures an Authorizer.
type Config struct {
	// Rules are the namespace rules. Empty: every request is allowed (no
	// authorization).
	Rules []Rule
}

// Authorizer applies the rules. Safe for concurrent use; immutable.
type Authorizer struct {
	rules []compiled // longest path first
}

type compiled struct {
	path              string
	prefix            bool
	read, fetch, deny []principal
	fetchSame         bool
}

// covers reports whether the rule applies to the clean path p.
func (c *compiled) covers(p string) bool {
	if c.prefix {
		return strings.HasPrefix(p, c.path)
	}
	return token.PathCovers(c.path, p)
}

type principal struct {
	kind, arg string
}

// New validates the rules and returns an Authorizer.
func New(cfg *Config) (*Authorizer, error) {
	a := &Authorizer{}
	var errs []error
	type ruleKey struct {
		path   string
		prefix bool
	}
	seen := map[ruleKey]bool{}
	for i, r := range cfg.Rules {
		p := r.Path
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") || strings.IndexByte(p, 0) >= 0 {
			errs = append(errs, fmt.Errorf("rule %d: path %q must be absolute without '..'", i, r.Path))
			continue
		}
		// A prefix rule keeps its final slash: "/store/" and "/store"
		// cover different paths.
		slash := r.Prefix && len(p) > 1 && strings.HasSuffix(p, "/")
		p = path.Clean(p)
		if slash {
			p += "/"
		}
		key := ruleKey{p, r.Prefix}
		if seen[key] {
			errs = append(errs, fmt.Errorf("rule %d: path %s has two rules", i, p))
			continue
		}
		seen[key] = true
		c := compiled{path: p, prefix: r.Prefix}
		var err error
		if len(r.Read) == 0 {
			errs = append(errs, fmt.Errorf("rule %s: read is empty (use [\"none\"] to deny everyone)", p))
		}
		if c.read, err = parsePrincipals(r.Read); err != nil {
			errs = append(errs, fmt.Errorf("rule %s: read: %w", p, err))
		}
		if len(r.Fetch) == 0 {
			c.fetchSame = true
		} else if c.fetch, err = parsePrincipals(r.Fetch); err != nil {
			errs = append(errs, fmt.Errorf("rule %s: fetch: %w", p, err))
		}
		if c.deny, err = parsePrincipals(r.Deny); err != nil {
			errs = append(errs, fmt.Errorf("rule %s: deny: %w", p, err))
		}
		for _, d := range c.deny {
			if d.kind == "scope" || d.kind == "none" {
				errs = append(errs, fmt.Errorf("rule %s: deny: %q takes nothing away (a scope grants before deny is applied; none matches nobody)", p, d.String()))
			}
		}
		a.rules = append(a.rules, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("authorization rules: %w", err)
	}
	// Longest first; of two rules with one path, the component rule first
	// (it covers fewer paths).
	sort.SliceStable(a.rules, func(i, j int) bool {
		ri, rj := a.rules[i], a.rules[j]
		if len(ri.path) != len(rj.path) {
			return len(ri.path) > len(rj.path)
		}
		return !ri.prefix && rj.prefix
	})
	return a, nil
}

func parsePrincipals(list []string) ([]principal, error) {
	var out []principal
	var errs []error
	for _, s := range list {
		kind, arg, _ := strings.Cut(strings.TrimSpace(s), ":")
		p := principal{kind: kind, arg: arg}
		switch kind {
		case "*":
			p.kind = "anonymous"
		case "anonymous", "authenticated", "none":
			if arg != "" {
				errs = append(errs, fmt.Errorf("%q takes no argument", s))
			}
		case "scope":
			if arg == "" {
				p.arg = "read"
			}
			switch p.arg {
			case "read", "stage":
			default:
				errs = append(errs, fmt.Errorf("%q: scope operation must be read or stage", s))
			}
		case "issuer", "vo", "dn", "user", "org", "role":
			if arg == "" {
				errs = append(errs, fmt.Errorf("%q needs a value after the colon", s))
			}
		case "group":
			if !strings.HasPrefix(arg, "/") {
				errs = append(errs, fmt.Errorf("%q: a group is a path like /cms/uscms", s))
			}
		case "fqan":
			f, err := voms.ParseFQAN(arg)
			if err != nil {
				errs = append(errs, fmt.Errorf("%q: %w", s, err))
			}
			p.arg = f.String()
		default:
			errs = append(errs, fmt.Errorf("unknown principal %q (want anonymous, authenticated, none, scope[:read|stage], issuer:URL, vo:NAME, org:NAME, group:/G, role:R, fqan:/G/Role=R, dn:DN, user:NAME)", s))
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// Decision is the outcome for one request.
type Decision struct {
	// Read: the subject may read the path.
	Read bool
	// Fetch: the subject may also make the cache download it.
	Fetch bool
	// Rule is the path of the deciding rule ("" when there are no rules).
	Rule string
	// Reason explains a denial (or a read-only grant) for the client and
	// the log.
	Reason string
}

// Decide applies the rules to subject s reading p (a clean absolute
// path).
func (a *Authorizer) Decide(s *Subject, p string) Decision {
	if len(a.rules) == 0 {
		return Decision{Read: true, Fetch: true}
	}
	for i := range a.rules {
		r := &a.rules[i]
		if !r.covers(p) {
			continue
		}
		d := Decision{Rule: r.path}
		// A token's scope is a grant its issuer made for the path: it
		// decides before the rule's deny list (XRootD's SciTokens library
		// before the authdb it chains to).
		scopeRead := matchKind(r.read, s, p, true)
		denied, by := matchFirst(r.deny, s, p)
		d.Read = scopeRead || !denied && matchKind(r.read, s, p, false)
		if !d.Read {
			if denied && matchAny(r.read, s, p) {
				d.Reason = fmt.Sprintf("%s may not read %s (rule %s denies %s)", s, p, r.path, by)
			} else {
				d.Reason = fmt.Sprintf("%s may not read %s (rule %s allows %s)", s, p, r.path, describe(r.read))
			}
			return d
		}
		switch {
		case r.fetchSame:
			d.Fetch = true
		default:
			d.Fetch = matchKind(r.fetch, s, p, true) || !denied && matchKind(r.fetch, s, p, false)
		}
		if !d.Fetch {
			d.Reason = fmt.Sprintf("%s may read %s only if it is cached; fetching it from the origin needs %s (rule %s)", s, p, describe(r.fetch), r.path)
			if denied {
				d.Reason += fmt.Sprintf(", which denies %s", by)
			}
		}
		return d
	}
	return Decision{Reason: fmt.Sprintf("no authorization rule covers %s", p)}
}

// String writes the principal as the configuration does.
func (pr principal) String() string {
	if pr.arg == "" {
		return pr.kind
	}
	return pr.kind + ":" + pr.arg
}

func describe(ps []principal) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, ", ")
}

// matchKind reports whether a principal of ps matches, among the scope
// principals (scopes) or among the others.
func matchKind(ps []principal, s *Subject, p string, scopes bool) bool {
	for _, pr := range ps {
		if (pr.kind == "scope") == scopes && pr.match(s, p) {
			return true
		}
	}
	return false
}

// matchFirst returns the first principal of ps that matches.
func matchFirst(ps []principal, s *Subject, p string) (bool, string) {
	for _, pr := range ps {
		if pr.match(s, p) {
			return true, pr.String()
		}
	}
	return false, ""
}

func matchAny(ps []principal, s *Subject, p string) bool {
	for _, pr := range ps {
		if pr.match(s, p) {
			return true
		}
	}
	return false
}

func (pr principal) match(s *Subject, p string) bool {
	switch pr.kind {
	case "anonymous":
		return true
	case "none":
		return false
	case "authenticated":
		return s.Authenticated()
	}
	if s == nil {
		return false
	}
	tok := s.Token
	switch pr.kind {
	case "scope":
		return tok != nil && tok.Allows(pr.arg, p)
	case "issuer":
		return tok != nil && tok.Issuer == pr.arg
	case "dn":
		return s.X509 != nil && s.X509.Subject == pr.arg
	case "user":
		return s.X509 != nil && s.User == pr.arg
	case "vo":
		for _, a := range s.VOMS {
			if a.VO == pr.arg {
				return true
			}
		}
		if tok != nil {
			for _, g := range tok.Groups {
				if token.PathCovers("/"+pr.arg, g) {
					return true
				}
			}
		}
	case "group":
		for _, a := range s.VOMS {
			for _, f := range a.FQANs {
				if fq, err := voms.ParseFQAN(f); err == nil && fq.Group == pr.arg {
					return true
				}
			}
		}
		if tok != nil {
			for _, g := range tok.Groups {
				if g == pr.arg {
					return true
				}
			}
		}
	case "org":
		for _, a := range s.VOMS {
			if a.VO == pr.arg {
				return true
			}
		}
		return tok != nil && tok.Issuer == pr.arg
	case "role":
		for _, a := range s.VOMS {
			for _, f := range a.FQANs {
				if fq, err := voms.ParseFQAN(f); err == nil && fq.Role == pr.arg {
					return true
				}
			}
		}
	case "fqan":
		for _, a := range s.VOMS {
			for _, f := range a.FQANs {
				if fq, err := voms.ParseFQAN(f); err == nil && fq.String() == pr.arg {
					return true
				}
			}
		}
	}
	return false
}
