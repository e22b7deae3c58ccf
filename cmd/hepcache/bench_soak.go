package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hepcache/hepcache/internal/bench"
	"github.com/hepcache/hepcache/internal/config"
)

func benchSoak(ctx context.Context, args []string) error {
	fs := newFlagSet("bench soak", `Reads through a hepcache for a long time with every kind of real client
(xrdcp with and without pgread, Python ranged reads and readv, curl whole
files and ranges, clients killed mid-way) while faults come on a schedule
(SIGHUP, kill -9 and restart, the origin stopped, the cache's disk full),
checks every byte against the origin, and follows the cache's memory, open
files and goroutines. The cache's RAM is below its capacity (blocks are read
back from disk too), and its listening sockets are held across restarts as
systemd holds hepcache.socket's. Prints tables of operations, errors by the
phase that ended them, resources, and p50/p99/max durations per client kind;
exits non-zero on a wrong byte, an operation longer than --max-op, a resource
that grows, no block read back from disk, or a bad block found by hepcache
verify at the end. The cache's disk is a tmpfs (needs root; --no-tmpfs skips
the full disk).`)
	var cfg bench.SoakConfig
	minSize, maxSize := config.Size(4<<20), config.Size(36<<20)
	fs.StringVar(&cfg.Dir, "dir", "results/soak", "work and results directory")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Minute, "length of the run")
	fs.DurationVar(&cfg.Cycle, "cycle", 10*time.Minute, "length of one fault cycle (SIGHUP, kill -9, origin stopped, full disk)")
	fs.IntVar(&cfg.Workers, "workers", 10, "clients running at once")
	fs.IntVar(&cfg.Files, "files", 120, "files at the origin")
	fs.Var(&minSize, "min-size", "smallest file")
	fs.Var(&maxSize, "max-size", "largest file")
	fs.Float64Var(&cfg.CapacityShare, "capacity-share", 0.25, "cache capacity as a share of the origin's data")
	fs.Float64Var(&cfg.CancelShare, "cancel-share", 0.1, "share of client operations killed mid-way")
	ram := config.Size(0)
	fs.Var(&ram, "ram", "the cache's cache.ram (default a quarter of its capacity, at least 16M: below it)")
	fs.DurationVar(&cfg.MaxOp, "max-op", time.Minute, "a client operation (not cancelled) longer than this fails the run")
	fs.DurationVar(&cfg.OpTimeout, "op-timeout", 0, "a client operation still running after this is stuck and killed (default max-op + 30s)")
	fs.DurationVar(&cfg.OriginTimeout, "origin-timeout", 15*time.Second, "the cache's origin.timeout")
	fs.BoolVar(&cfg.NoTmpfs, "no-tmpfs", false, "keep the cache on the work directory's file system and skip the full disk phase")
	fs.StringVar(&cfg.Python, "python", "/usr/bin/python3", "Python with the XRootD bindings")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the file sizes and the operations")
	cacheFlags := fs.String("cache-flags", "", "extra `hepcache serve` flags, space-separated")
	fs.BoolVar(&cfg.Smoke, "smoke", false, "start every server as the benchmark would, read one small file through each with xrdcp, and exit: checks the set-up in seconds, measures nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := absPath(&cfg.Dir); err != nil {
		return err
	}
	cfg.MinSize, cfg.MaxSize, cfg.RAM = int64(minSize), int64(maxSize), int64(ram)
	cfg.CacheFlags = strings.Fields(*cacheFlags)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	_, err := bench.Soak(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%w (details in %s)", err, cfg.Dir)
	}
	return nil
}
