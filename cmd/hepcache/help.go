package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/hepcache/hepcache/internal/buildinfo"
)

// summaries are the one-line descriptions of the subcommands and of the
// verbs of bench and sim ("bench wan"): the first line of their help, the
// command list of `hepcache help` and the NAME of their man pages.
var summaries = map[string]string{
	"serve":        "run the caching proxy",
	"demo":         "run origin, emulated WAN and cache on an embedded default; read cold and hot with xrdcp",
	"sim":          "replay access logs against simulated caches and size a cache",
	"bench":        "run the benchmarks that reproduce the papers' experiments",
	"inspect":      "show what the cache holds for a file, or a summary",
	"evict":        "remove a file from the cache, safely while the server runs",
	"disk":         "take data directories (cache.data_dirs) into service: disk init",
	"prestage":     "fetch a list of files into the cache of a running server",
	"verify":       "check cached blocks against their recorded CRC32C",
	"version":      "print the version",
	"check":        "check a configuration, every problem at once, without serving",
	"from-xcache":  "translate an XCache configuration into a hepcache.toml",
	"adopt-xcache": "take a warm XCache cache's files into the cache without copying them",
	"reload":       "make the running server reload (as SIGHUP), with or without systemd",
	"upgrade":      "hand the running server's sockets to the binary now installed (as SIGUSR2): no connection refused",
	"pelican":      "join a Pelican federation (OSDF) as a cache: register, status, downtime",

	"bench throughput": "cold, hot and hot-from-disk reads of one node against direct reads and XCache",
	"bench wan":        "many clients through an emulated WAN link, hepcache and XCache against direct reads",
	"bench floor":      "this machine's CPU floor per GiB: receive, direct write, send",
	"bench stall":      "clients that ask and never read next to normal readers: does a stalled send hold the cache's RAM",
	"bench link":       "run the emulated WAN link (RTT, bandwidth) alone, forwarding to a target",
	"bench soak":       "every real client kind through a node for hours while faults come on a schedule",
	"bench purge":      "fill a cache directory with many files and time a purge",
	"bench files":      "what each file costs: many small files cold and hot against XCache and the origin, restarts, descriptors, memory, projected to 10^7",
	"bench workflow":   "the Freiburg pseudo-analysis through the cache (seed 000, tables 1-3)",
	"bench resources":  "proxy CPU and memory against parallel requests (seed 000, tables 4-5)",
	"bench scale":      "many clients at varying rates against one cache (seed 004)",
	"bench layouts":    "dedicated, per-node and shared cache layouts (seed 003)",
	"bench job":        "one pseudo-analysis job, its timings as JSON (bench workflow's child process)",
	"bench generate":   "write an input file of the workflow benchmark",
	"bench cluster":    "real hepcache nodes on loopback, a C++ xrootd origin and xrdcp clients",
	"pelican register": "register the cache with the federation's registry now",
	"pelican status":   "ask the federation's registry and director where the cache stands",
	"pelican downtime": "put the cache in downtime (the director sends it no client) or out of it",
	"sim generate":     "write a synthetic trace (CMS-like defaults) as CSV",
	"sim run":          "replay a trace against one cache size and policy",
	"sim sweep":        "size a cache: exact LRU at every size, other policies, a recommendation",
	"sim bench":        "measure replay and sweep speed",
}

// commandNames lists the commands in order (from summaries: reading
// subcommands here would be an initialization cycle).
func commandNames() []string {
	var names []string
	for n := range summaries {
		if !strings.Contains(n, " ") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// verbList lists the verbs of cmd (bench, sim) with their summaries.
func verbList(cmd string) string {
	var b strings.Builder
	b.WriteString("verbs:")
	var names []string
	for n := range summaries {
		if v, ok := strings.CutPrefix(n, cmd+" "); ok {
			names = append(names, v)
		}
	}
	sort.Strings(names)
	for _, v := range names {
		fmt.Fprintf(&b, "\n  %-11s%s", v, summaries[cmd+" "+v])
	}
	return b.String()
}

// newFlagSet returns the flag set of a subcommand or verb (name as in
// summaries) whose -h prints the layout every command shares:
//
//	hepcache NAME: SUMMARY
//
//	usage: hepcache NAME ...
//
//	DESCRIPTION
//
//	flags:
//	  -flag ...
//
// usage lines default to "hepcache NAME [flags]"; desc may be empty.
// `hepcache help --man` turns this text into the man pages.
func newFlagSet(name, desc string, usage ...string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() { writeHelp(fs, name, desc, usage...) }
	return fs
}

// writeHelp writes the shared layout for fs (nil: no flags).
func writeHelp(fs *flag.FlagSet, name, desc string, usage ...string) {
	var out io.Writer = os.Stderr
	if fs != nil {
		out = fs.Output()
	}
	if len(usage) == 0 {
		usage = []string{"hepcache " + name + " [flags]"}
	}
	fmt.Fprintf(out, "hepcache %s: %s\n\nusage: %s\n", name, summaries[name], strings.Join(usage, "\n       "))
	if desc = strings.TrimSpace(desc); desc != "" {
		fmt.Fprintf(out, "\n%s\n", desc)
	}
	n := 0
	if fs != nil {
		fs.VisitAll(func(*flag.Flag) { n++ })
	}
	if n > 0 {
		fmt.Fprintf(out, "\nflags:\n")
		printFlagDefaults(out, fs)
	}
}

// zeroDefault reports whether f's default is its type's zero value (not
// printed, as flag's PrintDefaults does).
func zeroDefault(f *flag.Flag) (zero bool) {
	// A zero Value whose String panics is printed with its default.
	defer func() {
		if recover() != nil {
			zero = false
		}
	}()
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	v, ok := z.Interface().(flag.Value)
	return f.DefValue == "" || ok && f.DefValue == v.String()
}

// printFlagDefaults is flag's PrintDefaults with the dashes the synopses
// use: --name for long flags, -o for one letter (Go's parser takes both; the
// man pages listed -opt while their synopsis said --opt).
func printFlagDefaults(out io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		name, usage := flag.UnquoteUsage(f)
		line := "  " + dash + f.Name
		if name != "" {
			line += " " + name
		}
		usage = strings.ReplaceAll(usage, "\n", "\n    \t")
		line += "\n    \t" + usage
		if !zeroDefault(f) {
			if fmt.Sprintf("%T", f.Value) == "*flag.stringValue" {
				line += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				line += fmt.Sprintf(" (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(out, line)
	})
}

// runHelp prints the list of commands, or with --man DIR writes the man
// pages: hepcache.1 and one hepcache-NAME.1 per command, made from the
// commands' own -h output, so the pages never say other than --help.
func runHelp(ctx context.Context, args []string) error {
	fs := newFlagSet("help", "Without flags: the list of commands. With --man: the man pages, made from the\ncommands' -h output (make man writes packaging/man).", "hepcache help [--man DIR]")
	man := fs.String("man", "", "write the man pages (hepcache.1, hepcache-COMMAND.1) into `DIR`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *man == "" {
		usage()
		return nil
	}
	return writeManPages(*man)
}

// writeManPages runs this binary's COMMAND -h for every command and
// writes each as a man page into dir.
func writeManPages(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := commandNames()
	version := buildinfo.Get().Version
	var list strings.Builder
	for _, n := range names {
		var out bytes.Buffer
		cmd := exec.Command(self, n, "-h")
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Run() // -h exits 0 or 2 depending on the command; the text is what counts
		page, err := manPage(n, version, out.String())
		if err != nil {
			return fmt.Errorf("man page of %s: %w", n, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hepcache-"+n+".1"), []byte(page), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&list, ".TP\n.B hepcache %s\n%s\n", n, roff(summaries[n]))
	}
	top := fmt.Sprintf(".TH HEPCACHE 1 \"\" \"hepcache %s\" \"hepcache manual\"\n.SH NAME\nhepcache \\- a disk caching proxy for HEP data (root:// and HTTP), XCache's successor\n.SH SYNOPSIS\n.B hepcache\n.I COMMAND\n[flags]\n.SH COMMANDS\n%s.SH FILES\n.TP\n.I /etc/hepcache/hepcache.toml\nthe configuration; every key with its default: /usr/share/doc/hepcache/hepcache.toml\n.SH SEE ALSO\n%s\n",
		roff(version), list.String(), seeAlso(names, ""))
	return os.WriteFile(filepath.Join(dir, "hepcache.1"), []byte(top), 0o644)
}

// manPage turns one command's help text (the layout of writeHelp) into
// a man page.
func manPage(name, version, help string) (string, error) {
	lines := strings.Split(strings.TrimRight(help, "\n"), "\n")
	head := "hepcache " + name + ": "
	if len(lines) < 3 || !strings.HasPrefix(lines[0], head) {
		return "", fmt.Errorf("help does not start with %q:\n%s", head, help)
	}
	var b strings.Builder
	fmt.Fprintf(&b, ".TH HEPCACHE-%s 1 \"\" \"hepcache %s\" \"hepcache manual\"\n", strings.ToUpper(name), roff(version))
	fmt.Fprintf(&b, ".SH NAME\nhepcache-%s \\- %s\n", name, roff(strings.TrimPrefix(lines[0], head)))
	section := ""
	for _, l := range lines[1:] {
		switch {
		case strings.HasPrefix(l, "usage: "):
			b.WriteString(".SH SYNOPSIS\n.nf\n" + roff(strings.TrimPrefix(l, "usage: ")) + "\n")
			section = "usage"
			continue
		case l == "flags:":
			b.WriteString(".SH OPTIONS\n")
			section = "flags"
			continue
		}
		switch section {
		case "usage":
			if strings.HasPrefix(l, "       hepcache ") {
				b.WriteString(roff(strings.TrimSpace(l)) + "\n")
				continue
			}
			b.WriteString(".fi\n.SH DESCRIPTION\n")
			section = "desc"
			fallthrough
		case "desc":
			if l == "" {
				b.WriteString(".PP\n")
			} else {
				b.WriteString(roff(l) + "\n")
			}
		case "flags":
			// flag.PrintDefaults: "  -name type" then "    \thelp".
			if t := strings.TrimSpace(l); strings.HasPrefix(l, "  -") {
				b.WriteString(".TP\n.B " + roff(t) + "\n")
			} else if t != "" {
				b.WriteString(roff(t) + "\n")
			}
		}
	}
	if section == "usage" {
		b.WriteString(".fi\n")
	}
	fmt.Fprintf(&b, ".SH SEE ALSO\n%s\n", seeAlso(nil, "hepcache"))
	return b.String(), nil
}

// seeAlso lists man page references: hepcache-NAME(1) of names, or top.
func seeAlso(names []string, top string) string {
	if top != "" {
		return ".BR " + top + " (1)"
	}
	var refs []string
	for i, n := range names {
		r := ".BR hepcache\\-" + roff(n) + " (1)"
		if i < len(names)-1 {
			r += ","
		}
		refs = append(refs, r)
	}
	return strings.Join(refs, "\n")
}

// roff escapes text for a man page: backslashes, and a dot or quote that
// would start a request at the beginning of a line.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
