// Command hepcache is a disk caching proxy for High Energy Physics data.
//
// The command only parses flags and wires packages together; every
// subcommand lives in its own file and calls into internal packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// subcommand is one verb of the command line.
type subcommand struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

// subcommands lists the verbs; each run function lives in a file of its own.
var subcommands = map[string]subcommand{
	"serve":        {"run the caching proxy", runServe},
	"demo":         {"run origin, emulated WAN and cache on an embedded default; read cold and hot with xrdcp", runDemo},
	"sim":          {"replay access logs against simulated caches and size a cache", runSim},
	"bench":        {"run the benchmarks that reproduce the papers' experiments", runBench},
	"inspect":      {"show what the cache holds for a file, or a summary", runInspect},
	"evict":        {"remove a file from the cache, safely while the server runs", runEvict},
	"disk":         {"take data directories (cache.data_dirs) into service: disk init", runDisk},
	"prestage":     {"fetch a list of files into the cache of a running server", runPrestage},
	"verify":       {"check cached blocks against their recorded CRC32C", runVerify},
	"version":      {"print the version", runVersion},
	"check":        {"check a configuration, every problem at once, without serving", runCheck},
	"from-xcache":  {"translate an XCache configuration into a hepcache.toml", runFromXCache},
	"reload":       {"make the running server reload (as SIGHUP), with or without systemd", runReload},
	"adopt-xcache": {"take a warm XCache cache's files into the cache without copying them", runAdoptXCache},
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: hepcache COMMAND [flags]\n\ncommands:\n")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, subcommands[n].summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'hepcache COMMAND -h' for the flags of a command.\n")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "-h" || name == "--help" || name == "help" {
		usage()
		return
	}
	if name == "--version" || name == "-version" {
		name = "version"
	}
	cmd, ok := subcommands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "hepcache: unknown command %q\n\n", name)
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "hepcache %s: %v\n", name, err)
		os.Exit(1)
	}
}
