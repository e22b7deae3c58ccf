package main

import (
	"context"
	"os"

	"github.com/hepcache/hepcache/internal/clusterrun"
	"github.com/hepcache/hepcache/internal/config"
)

// benchCluster runs `hepcache bench cluster`: real hepcache nodes on
// loopback (this binary), a C++ xrootd origin and xrdcp clients.
func benchCluster(ctx context.Context, args []string) error {
	fs := newFlagSet("bench cluster", "")
	var cfg clusterrun.BenchConfig
	size := config.Size(32 << 20)
	nodes := intList{1, 2, 4}
	fs.Var(&nodes, "nodes", "cluster sizes measured (comma-separated)")
	fs.IntVar(&cfg.Files, "files", 16, "files in the data set")
	fs.Var(&size, "size", "size of each file")
	fs.IntVar(&cfg.Clients, "clients", 8, "parallel xrdcp clients in the hot phase")
	fs.IntVar(&cfg.Rounds, "rounds", 2, "times each client copies every file")
	fs.StringVar(&cfg.Dir, "dir", "", "scratch directory (default: a temporary one)")
	fs.BoolVar(&cfg.Smoke, "smoke", false, "start every server as the benchmark would, read one small file through each with xrdcp, and exit: checks the set-up in seconds, measures nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := absPath(&cfg.Dir); err != nil {
		return err
	}
	cfg.Nodes, cfg.FileSize, cfg.Log = nodes, int64(size), os.Stderr
	rep, err := clusterrun.Bench(ctx, cfg)
	if err != nil || rep == nil { // --smoke: no report
		return err
	}
	rep.Print(os.Stdout)
	return nil
}
