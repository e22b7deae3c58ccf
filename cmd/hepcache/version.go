package main

import (
	"context"
	"fmt"

	"github.com/hepcache/hepcache/internal/buildinfo"
)

func runVersion(ctx context.Context, args []string) error {
	fs := newFlagSet("version", "Prints the version, the commit the binary was built from and the Go version.", "hepcache version")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Println(buildinfo.Get())
	return nil
}
