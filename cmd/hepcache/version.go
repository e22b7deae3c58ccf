package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

func runVersion(ctx context.Context, args []string) error {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	fmt.Println("hepcache", v)
	return nil
}
