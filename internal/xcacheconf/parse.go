// Package xcacheconf translates an XCache (XRootD with XrdPss and XrdPfc)
// configuration into a hepcache.toml: it reads the file as xrootd does
// (set variables, if/else/fi on program, instance and host names, continue
// into further files or directories, the authdb and scitokens.cfg it
// points to) and maps each directive onto its hepcache key, with a comment
// naming the directive, or onto a warning saying why there is none.
package xcacheconf

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Directive is one configuration directive as xrootd would see it, after
// variables were substituted and if/else chose it.
type Directive struct {
	File string
	Line int
	// Name is the directive ("pfc.ram"); Args its words.
	Name string
	Args []string
}

// Where names the directive for comments and warnings ("xcache.cfg:12").
func (d Directive) Where() string { return fmt.Sprintf("%s:%d", filepath.Base(d.File), d.Line) }

// Text is the directive as written, after substitution.
func (d Directive) Text() string { return strings.TrimSpace(d.Name + " " + strings.Join(d.Args, " ")) }

// Options say which program, instance and host the configuration is read
// for (its if-conditions).
type Options struct {
	// Program is the executable the if-exec conditions test. Default
	// "xrootd" (a cmsd's directives are not the cache's).
	Program string
	// Instance is the -n name if-named tests. Default "anon", as xrootd.
	Instance string
	// Host is the host name if-host tests. Default os.Hostname.
	Host string
}

func (o *Options) defaults() {
	if o.Program == "" {
		o.Program = "xrootd"
	}
	if o.Instance == "" {
		o.Instance = "anon"
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
}

// maxDepth bounds continue chains (a file continuing into itself).
const maxDepth = 16

type reader struct {
	opt   Options
	vars  map[string]string
	out   []Directive
	warns []string
}

// Read reads the configuration file at name with the directives its if
// conditions select for opt, following continue directives.
func Read(name string, opt Options) ([]Directive, []string, error) {
	opt.defaults()
	r := &reader{opt: opt, vars: map[string]string{}}
	if err := r.file(name, 0); err != nil {
		return nil, nil, err
	}
	return r.out, r.warns, nil
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_.]*)\)|\$\{([A-Za-z_][A-Za-z0-9_.]*)\}|\$([A-Za-z_][A-Za-z0-9_.]*)`)

// subst replaces $(name), ${name} and $name by set variables (or, for
// names set by setenv or the environment, their values).
func (r *reader) subst(s, where string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := varRef.FindStringSubmatch(m)
		n := sub[1] + sub[2] + sub[3]
		if v, ok := r.vars[n]; ok {
			return v
		}
		if v, ok := os.LookupEnv(n); ok {
			return v
		}
		r.warns = append(r.warns, fmt.Sprintf("%s: variable %s is not set; left as written", where, m))
		return m
	})
}

// cond is one open if: whether its branch is being read, and whether a
// branch of it was already taken.
type cond struct{ active, taken, parent bool }

func (r *reader) file(name string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: continue nested more than %d deep", name, maxDepth)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("xcache config: %w", err)
	}
	var stack []cond
	active := func() bool { return len(stack) == 0 || stack[len(stack)-1].active }
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	lineNo, start := 0, 0
	var acc string
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if acc == "" {
			start = lineNo
		}
		if strings.HasSuffix(line, "\\") {
			acc += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, acc = acc+line, ""
		words := fields(stripComment(line))
		if len(words) == 0 {
			continue
		}
		where := fmt.Sprintf("%s:%d", filepath.Base(name), start)
		switch words[0] {
		case "if":
			on := active()
			stack = append(stack, cond{parent: on})
			c := &stack[len(stack)-1]
			c.active = on && r.test(r.substAll(words[1:], where), where)
			c.taken = c.active
			continue
		case "else":
			if len(stack) == 0 {
				return fmt.Errorf("%s: else without if", where)
			}
			c := &stack[len(stack)-1]
			if len(words) > 1 && words[1] == "if" {
				c.active = c.parent && !c.taken && r.test(r.substAll(words[2:], where), where)
			} else {
				c.active = c.parent && !c.taken
			}
			c.taken = c.taken || c.active
			continue
		case "fi":
			if len(stack) == 0 {
				return fmt.Errorf("%s: fi without if", where)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		if !active() {
			continue
		}
		words = r.substAll(words, where)
		switch words[0] {
		case "set", "setenv":
			n, v, ok := setArgs(words[1:])
			if !ok {
				r.warns = append(r.warns, fmt.Sprintf("%s: %s needs a name and a value", where, words[0]))
				continue
			}
			r.vars[n] = v
			continue
		case "continue":
			// As xrootd: the rest of this file is not read; the continued
			// file (or a directory's files) takes its place, once.
			if len(stack) > 0 {
				return fmt.Errorf("%s: continue inside if-fi (xrootd refuses it)", where)
			}
			if depth > 0 {
				return fmt.Errorf("%s: continue in a continued file (xrootd refuses it)", where)
			}
			if len(words) < 2 {
				return nil
			}
			var sufs []string
			rest := words[2:]
			for len(rest) > 0 && strings.HasPrefix(rest[0], "*") {
				sufs, rest = append(sufs, rest[0][1:]), rest[1:]
			}
			if len(rest) > 0 && (rest[0] != "if" || !r.test(rest[1:], where)) {
				if rest[0] != "if" {
					return fmt.Errorf("%s: continue: expecting 'if', found %q", where, rest[0])
				}
				continue
			}
			for sc.Scan() {
				if len(fields(stripComment(sc.Text()))) > 0 {
					r.warns = append(r.warns, fmt.Sprintf("%s: lines after continue are not read (as by xrootd)", where))
					break
				}
			}
			return r.cont(words[1], sufs, filepath.Dir(name), depth)
		}
		r.out = append(r.out, Directive{File: name, Line: start, Name: words[0], Args: words[1:]})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("xcache config %s: %w", name, err)
	}
	if len(stack) > 0 {
		return fmt.Errorf("%s: if without fi", filepath.Base(name))
	}
	return nil
}

func (r *reader) substAll(words []string, where string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = r.subst(w, where)
	}
	return out
}

// cont reads the file continue names, or a directory's files in name order
// (those ending in one of the suffixes, if any; not executable, hidden or
// backup files). A path starting with "?" may be missing.
func (r *reader) cont(p string, sufs []string, base string, depth int) error {
	optional := strings.HasPrefix(p, "?")
	p = strings.TrimPrefix(p, "?")
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	st, err := os.Stat(p)
	if err != nil {
		if optional && os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("continue: %w", err)
	}
	if !st.IsDir() {
		return r.file(p, depth+1)
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return fmt.Errorf("continue: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || strings.HasSuffix(n, "~") || strings.Contains(n, ".rpm") || strings.Contains(n, ".dpkg-") {
			continue
		}
		if fi, err := e.Info(); err != nil || fi.Mode()&0o111 != 0 {
			continue
		}
		if len(sufs) > 0 {
			ok := false
			for _, s := range sufs {
				if strings.HasSuffix(n, s) {
					ok = true
				}
			}
			if !ok {
				continue
			}
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := r.file(filepath.Join(p, n), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// test evaluates an if condition: host patterns, then optional "exec
// PROGRAMS" and "named NAMES", all of which must hold; or "defined VARS".
func (r *reader) test(words []string, where string) bool {
	if len(words) > 0 && words[0] == "defined" {
		for _, v := range words[1:] {
			v = strings.TrimPrefix(strings.TrimPrefix(v, "?~"), "~")
			if _, ok := r.vars[v]; ok {
				return true
			}
			if _, ok := os.LookupEnv(v); ok {
				return true
			}
		}
		return false
	}
	var hosts, execs, names []string
	list := &hosts
	for _, w := range words {
		switch w {
		case "exec":
			list = &execs
		case "named":
			list = &names
		case "&&":
		default:
			*list = append(*list, w)
		}
	}
	match := func(pats []string, v string) bool {
		for _, p := range pats {
			if ok, _ := path.Match(p, v); ok {
				return true
			}
		}
		return false
	}
	ok := true
	if len(hosts) > 0 {
		ok = ok && (match(hosts, r.opt.Host) || match(hosts, strings.Split(r.opt.Host, ".")[0]))
	}
	if len(execs) > 0 {
		ok = ok && match(execs, r.opt.Program)
	}
	if len(names) > 0 {
		ok = ok && match(names, r.opt.Instance)
	}
	return ok
}

// setArgs reads "name = value" or "name value".
func setArgs(w []string) (string, string, bool) {
	switch {
	case len(w) >= 3 && w[1] == "=":
		return w[0], strings.Join(w[2:], " "), true
	case len(w) >= 2:
		if n, v, ok := strings.Cut(w[0], "="); ok && n != "" {
			return n, strings.TrimSpace(v + " " + strings.Join(w[1:], " ")), true
		}
		return w[0], strings.Join(w[1:], " "), true
	case len(w) == 1:
		if n, v, ok := strings.Cut(w[0], "="); ok && n != "" {
			return n, v, true
		}
	}
	return "", "", false
}

// stripComment drops a # that starts a word and what follows it.
func stripComment(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t') {
			return s[:i]
		}
	}
	return s
}

func fields(s string) []string { return strings.Fields(s) }
