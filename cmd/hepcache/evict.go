package main

import (
	"context"
	"errors"
)

func runEvict(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
