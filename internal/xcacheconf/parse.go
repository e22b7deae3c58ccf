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
	"io"
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

// Bounds on what a configuration can make the reader hold: a variable's
// value after substitution ("set a = $(a)$(a)" forty times is 2^40
// bytes), a configuration file, and all of them together.
const (
	maxValue = 64 << 10
	maxFile  = 4 << 20
	maxTotal = 16 << 20
)

type reader struct {
	opt   Options
	vars  map[string]string
	out   []Directive
	warns []string
	// home is the directory of the configuration given: lines of files
	// outside it are never quoted (continue /etc/shadow).
	home string
	read int64 // bytes of configuration read
	// private: a file read is not readable by everyone.
	private bool
}

// Read reads the configuration file at name with the directives its if
// conditions select for opt, following continue directives.
func Read(name string, opt Options) ([]Directive, []string, error) {
	ds, warns, _, err := read(name, opt)
	return ds, warns, err
}

// read is Read, also reporting whether a file read is not readable by
// everyone (what is made from it may hold its secrets).
func read(name string, opt Options) ([]Directive, []string, bool, error) {
	opt.defaults()
	r := &reader{opt: opt, vars: map[string]string{}, home: filepath.Dir(name)}
	if err := r.file(name, 0); err != nil {
		return nil, nil, false, err
	}
	return r.out, r.warns, r.private, nil
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_.]*)\)|\$\{([A-Za-z_][A-Za-z0-9_.]*)\}|\$([A-Za-z_][A-Za-z0-9_.]*)`)

// subst replaces $(name), ${name} and $name by set variables (or, for
// names set by setenv or the environment, their values). A result longer
// than maxValue is an error.
func (r *reader) subst(s, where string) (string, error) {
	n := 0
	var long bool
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		if long {
			return ""
		}
		v := r.value(m, where)
		if n += len(v); n > maxValue {
			long = true
			return ""
		}
		return v
	})
	if long || len(out) > maxValue {
		return "", fmt.Errorf("%s: a value longer than %d bytes after substituting variables: refused", where, maxValue)
	}
	return out, nil
}

// value is what the variable reference m stands for.
func (r *reader) value(m, where string) string {
	{
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
	}
}

// cond is one open if: whether its branch is being read, and whether a
// branch of it was already taken.
type cond struct{ active, taken, parent bool }

func (r *reader) file(name string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: continue nested more than %d deep", name, maxDepth)
	}
	b, err := r.readConfig(name, depth > 0)
	if err != nil {
		return err
	}
	foreign := !within(r.home, name)
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
		if foreign && !directiveLike(words[0]) {
			// Never quote a line of a file outside the configuration's
			// directory that is not a directive: continue /etc/shadow
			// would print password hashes.
			return fmt.Errorf("%s: line %d of %s is not an XRootD directive: not a configuration file (its lines are not shown)", filepath.Base(name), lineNo, name)
		}
		where := fmt.Sprintf("%s:%d", filepath.Base(name), start)
		switch words[0] {
		case "if":
			if len(stack) > 0 {
				r.warns = append(r.warns, fmt.Sprintf("%s: an if inside an if: xrootd refuses nested if (it will not start with this file); read here as nested", where))
			}
			on := active()
			stack = append(stack, cond{parent: on})
			c := &stack[len(stack)-1]
			ws, err := r.substAll(words[1:], where)
			if err != nil {
				return err
			}
			c.active = on && r.test(ws, where)
			c.taken = c.active
			continue
		case "else":
			if len(stack) == 0 {
				return fmt.Errorf("%s: else without if", where)
			}
			c := &stack[len(stack)-1]
			if len(words) > 1 && words[1] == "if" {
				ws, err := r.substAll(words[2:], where)
				if err != nil {
					return err
				}
				c.active = c.parent && !c.taken && r.test(ws, where)
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
		if words, err = r.substAll(words, where); err != nil {
			return err
		}
		switch words[0] {
		case "set", "setenv":
			n, v, ok := setArgs(words[1:])
			if !ok {
				r.warns = append(r.warns, fmt.Sprintf("%s: %s needs a name and a value", where, words[0]))
				continue
			}
			if words[0] == "setenv" && strings.HasPrefix(n, "XRD_") {
				r.warns = append(r.warns, fmt.Sprintf("%s: setenv %s: xrootd refuses to set XRD_ variables (client settings) in its configuration; ignored by hepcache too (its origin client has its own settings)", where, n))
			}
			if len(v) > maxValue {
				return fmt.Errorf("%s: %s %s: a value longer than %d bytes: refused", where, words[0], n, maxValue)
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

func (r *reader) substAll(words []string, where string) ([]string, error) {
	out := make([]string, len(words))
	for i, w := range words {
		v, err := r.subst(w, where)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// readConfig reads a configuration file, bounded: a regular text file of
// at most maxFile bytes, maxTotal for all of them. continued says it was
// named by a continue directive (not by the administrator).
func (r *reader) readConfig(name string, continued bool) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("xcache config: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("xcache config: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("xcache config %s: not a regular file", name)
	}
	if st.Size() > maxFile {
		return nil, fmt.Errorf("xcache config %s: %d bytes, more than a configuration file (%d)", name, st.Size(), maxFile)
	}
	r.private = r.private || st.Mode().Perm()&0o004 == 0
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("xcache config: %w", err)
	}
	if r.read += int64(len(b)); r.read > maxTotal || len(b) > maxFile {
		return nil, fmt.Errorf("xcache config %s: more than %d bytes of configuration in all", name, maxTotal)
	}
	if bytes.IndexByte(b, 0) >= 0 {
		what := "continue " + name
		if !continued {
			what = name
		}
		return nil, fmt.Errorf("%s: a binary file, not a configuration file", what)
	}
	return b, nil
}

// directiveLike reports whether w can start an XRootD configuration line:
// a directive (prefix.name) or one of the reader's own words.
func directiveLike(w string) bool {
	switch w {
	case "set", "setenv", "if", "else", "fi", "continue":
		return true
	}
	pre, name, ok := strings.Cut(w, ".")
	if !ok || pre == "" || name == "" {
		return false
	}
	for _, c := range w {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// within reports whether file lies in dir (both as named, cleaned).
func within(dir, file string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(file))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
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
