package main

import (
	"context"
	"time"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/demo"
)

func runDemo(ctx context.Context, args []string) error {
	fs := newFlagSet("demo", "Starts an origin (Debian's xrootd when installed, else hepcache's own), an\nemulated WAN link in front of it and a cache, and reads the files cold and hot\nwith xrdcp (or hepcache's client) and curl, then a local redirect.", "hepcache demo [flags]")
	var cfg demo.Config
	size := config.Size(64 << 20)
	fs.StringVar(&cfg.Dir, "dir", "", "keep dataset, cache and logs here (default: a temporary directory, removed)")
	fs.IntVar(&cfg.Files, "files", 4, "number of files")
	fs.Var(&size, "size", "file size")
	fs.DurationVar(&cfg.RTT, "rtt", 150*time.Millisecond, "emulated WAN round-trip time")
	fs.Int64Var(&cfg.Bandwidth, "bandwidth", 100e6, "emulated WAN bandwidth, bytes/s")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.FileSize = int64(size)
	_, err := demo.Run(ctx, cfg)
	return err
}
