package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/hepcache/hepcache/internal/buildinfo"
)

func runVersion(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: hepcache version\n\nPrints the version, the commit the binary was built from and the Go version.\n")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Println(buildinfo.Get())
	return nil
}
