package main

import (
	"context"
	"errors"
)

func runInspect(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
