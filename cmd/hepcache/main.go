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
	"syscall"
)

// subcommands lists the verbs; each run function lives in a file of its
// own, each summary in summaries (help.go).
var subcommands = map[string]func(ctx context.Context, args []string) error{
	"serve":        runServe,
	"demo":         runDemo,
	"sim":          runSim,
	"bench":        runBench,
	"inspect":      runInspect,
	"evict":        runEvict,
	"disk":         runDisk,
	"prestage":     runPrestage,
	"verify":       runVerify,
	"version":      runVersion,
	"check":        runCheck,
	"from-xcache":  runFromXCache,
	"adopt-xcache": runAdoptXCache,
	"reload":       runReload,
	"upgrade":      runUpgrade,
	"pelican":      runPelican,
	"help":         runHelp,
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: hepcache COMMAND [flags]\n\ncommands:\n")
	for _, n := range commandNames() {
		fmt.Fprintf(os.Stderr, "  %-12s %s\n", n, summaries[n])
	}
	fmt.Fprintf(os.Stderr, "\nRun 'hepcache COMMAND -h' for the flags of a command; man hepcache-COMMAND.\n")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "-h" || name == "--help" || name == "help" && len(os.Args) == 2 {
		usage()
		return
	}
	if name == "--version" || name == "-version" {
		name = "version"
	}
	run, ok := subcommands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "hepcache: unknown command %q\n\n", name)
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "hepcache %s: %v\n", name, err)
		os.Exit(1)
	}
}
