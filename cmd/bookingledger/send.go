package main

import (
	"context"
	"errors"
	"io"
)

func runSend(_ context.Context, _ []string, _ func(string) string, _, _ io.Writer) error {
	return errors.New("send: not implemented yet")
}
