package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"bookingledger/cmd/bookingledger/internal/cmdline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(cmdline.ExitCode(err, os.Stderr))
}
