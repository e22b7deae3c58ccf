// Package policy holds a site's namespace rules: what is cached, passed
// through without caching (e.g. pile-up files read randomly by simulation
// jobs), or denied; which paths are mutable and must be revalidated; and the
// regular-expression rules that map logical file names to physical names and
// origins (as CMS sites map LFNs to PFNs). Rules are tried in order; the first
// match wins.
package policy

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Action is what to do with a path.
type Action int

// Actions. ONLY APPEND: numbers appear in logs and metrics.
const (
	Cache       Action = iota // cache it (the default)
	PassThrough               // read from the origin without caching
	Deny                      // refuse it
)

func (a Action) String() string {
	switch a {
	case PassThrough:
		return "passthrough"
	case Deny:
		return "deny"
	default:
		return "cache"
	}
}

// ParseAction parses "cache", "passthrough" or "deny".
func ParseAction(s string) (Action, error) {
	switch strings.ToLower(s) {
	case "cache", "":
		return Cache, nil
	case "passthrough", "pass-through", "bypass":
		return PassThrough, nil
	case "deny":
		return Deny, nil
	}
	return 0, fmt.Errorf("action %q: want cache, passthrough or deny", s)
}

// Rule is one namespace rule. Exactly one of Prefix and Pattern is set.
type Rule struct {
	// Prefix matches paths under it ("/store/mc/" matches "/store/mc/x").
	Prefix string
	// Pattern is a shell glob matched against the whole path
	// ("/store/*/pileup/*"); '*' does not cross '/'.
	Pattern string
	Action  Action
	// Mutable paths are revalidated at open: if the origin's size or
	// modification time changed, the cached copy is dropped.
	Mutable bool
}

// MapRule rewrites a logical path to a physical path, optionally at another
// origin.
type MapRule struct {
	// Match is a regular expression on the logical path.
	Match string
	// Replace is the physical path, with $1... for submatches.
	Replace string
	// Origin, if set, serves the mapped path (for requests that name none).
	Origin string

	re *regexp.Regexp
}

// Decision is the outcome for one path.
type Decision struct {
	Action  Action
	Mutable bool
	// Rule describes the matching rule for messages ("" if none matched).
	Rule string
}

// Policy is a compiled rule set. The zero value caches everything. Safe for
// concurrent use.
type Policy struct {
	rules []Rule
	maps  []MapRule
}

// New validates and compiles the rules.
func New(rules []Rule, maps []MapRule) (*Policy, error) {
	var errs []error
	for i, r := range rules {
		switch {
		case (r.Prefix == "") == (r.Pattern == ""):
			errs = append(errs, fmt.Errorf("namespace rule %d: give exactly one of prefix and pattern", i+1))
		case r.Prefix != "" && !strings.HasPrefix(r.Prefix, "/"):
			errs = append(errs, fmt.Errorf("namespace rule %d: prefix %q must start with /", i+1, r.Prefix))
		case r.Pattern != "":
			if _, err := path.Match(r.Pattern, "/"); err != nil {
				errs = append(errs, fmt.Errorf("namespace rule %d: pattern %q: %w", i+1, r.Pattern, err))
			}
		}
	}
	cm := make([]MapRule, len(maps))
	for i, m := range maps {
		re, err := regexp.Compile(m.Match)
		if err != nil {
			errs = append(errs, fmt.Errorf("map rule %d: match %q: %w", i+1, m.Match, err))
			continue
		}
		if !strings.HasPrefix(m.Replace, "/") {
			errs = append(errs, fmt.Errorf("map rule %d: replace %q must give an absolute path", i+1, m.Replace))
		}
		m.re = re
		cm[i] = m
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Policy{rules: rules, maps: cm}, nil
}

// Decide returns what to do with logical path p.
func (p *Policy) Decide(lp string) Decision {
	if p == nil {
		return Decision{}
	}
	for i, r := range p.rules {
		if r.matches(lp) {
			what := r.Prefix
			if what == "" {
				what = r.Pattern
			}
			return Decision{Action: r.Action, Mutable: r.Mutable, Rule: fmt.Sprintf("namespace rule %d (%s %s)", i+1, what, r.Action)}
		}
	}
	return Decision{}
}

func (r Rule) matches(p string) bool {
	if r.Prefix != "" {
		pre := strings.TrimSuffix(r.Prefix, "/")
		return p == pre || strings.HasPrefix(p, pre+"/") || pre == ""
	}
	ok, _ := path.Match(r.Pattern, p)
	return ok
}

// Map applies the first matching map rule to logical path lp. It returns the
// physical path and the origin named by the rule ("" if none), or lp
// unchanged.
func (p *Policy) Map(lp string) (pp, origin string) {
	if p == nil {
		return lp, ""
	}
	for _, m := range p.maps {
		if idx := m.re.FindStringSubmatchIndex(lp); idx != nil {
			out := m.re.ExpandString(nil, m.Replace, lp, idx)
			return path.Clean(string(out)), m.Origin
		}
	}
	return lp, ""
}
