package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
)

const devSinksUsage = `Usage: bookingledger dev-sinks [--only NAME,...] [--env-file PATH]

Starts local stand-ins for the systems bookingledger talks to, each on a loopback port of its own
(never a public address), prints the environment lines that point serve at them (KEY=VALUE, one a
line, then "dev-sinks: ready"), optionally writes the same lines to --env-file, and then prints one
line per thing a sink receives until interrupted (SIGINT, SIGTERM). For development and the README
tour only: sinks keep what they receive in memory and accept anything. Sinks: %s.`

// devSink is one local stand-in. Each lives in its own file (devsink_<name>.go) and is listed once in
// devSinks; start returns the environment lines for serve and the function that stops it. report
// prints one line per received message; it is safe for concurrent use.
type devSink struct {
	name  string
	about string
	start func(ctx context.Context, report func(format string, args ...any)) (env []string, stop func() error, err error)
}

// devSinks lists every sink, in start order. Add a sink by writing its devsink_<name>.go and adding
// its constructor here.
func devSinks() []devSink {
	return []devSink{smtpDevSink(), caldavDevSink(), acuityDevSink(), calendlyAPIDevSink(), calcomAPIDevSink(), stripeAPIDevSink(), webhookDevSink()}
}

func devSinkNames(sinks []devSink) string {
	names := make([]string, len(sinks))
	for i, s := range sinks {
		names[i] = s.name + " (" + s.about + ")"
	}
	return strings.Join(names, ", ")
}

func runDevSinks(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	all := devSinks()
	f := newEnvFlags("dev-sinks", getenv, stderr, fmt.Sprintf(devSinksUsage, devSinkNames(all)))
	only := f.String("only", []string{"BOOKINGLEDGER_DEV_SINKS"}, "", "comma-separated sinks to start (default: all)")
	envFile := f.String("env-file", []string{"BOOKINGLEDGER_DEV_SINKS_ENV_FILE"}, "", "also write the environment lines to this file")
	rest, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("dev-sinks takes no arguments, got %q", rest)
	}
	chosen, err := chooseDevSinks(all, *only)
	if err != nil {
		return err
	}

	var mu sync.Mutex
	out := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stdout, format+"\n", args...)
	}
	var (
		env   []string
		stops []func() error
	)
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			_ = stops[i]()
		}
	}()
	for _, s := range chosen {
		name := s.name
		e, stop, err := s.start(ctx, func(format string, args ...any) { out(name+": "+format, args...) })
		if err != nil {
			return fmt.Errorf("dev-sinks: start %s: %w", s.name, err)
		}
		stops = append(stops, stop)
		env = append(env, e...)
	}
	sort.Strings(env)
	env = compactStrings(env) // two sinks may both allow private targets
	if *envFile != "" {
		// Written atomically: run.sh waits for the file, then reads it whole.
		tmp := *envFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
			return fmt.Errorf("dev-sinks: write env file: %w", err)
		}
		if err := os.Rename(tmp, *envFile); err != nil {
			return fmt.Errorf("dev-sinks: write env file: %w", err)
		}
	}
	for _, line := range env {
		out("%s", line)
	}
	out("dev-sinks: ready")
	<-ctx.Done()
	return nil
}

func chooseDevSinks(all []devSink, only string) ([]devSink, error) {
	if strings.TrimSpace(only) == "" {
		return all, nil
	}
	var chosen []devSink
	for _, n := range strings.Split(only, ",") {
		n = strings.TrimSpace(n)
		found := false
		for _, s := range all {
			if s.name == n {
				chosen, found = append(chosen, s), true
			}
		}
		if !found {
			return nil, usageErrorf("dev-sinks: unknown sink %q (have %s)", n, devSinkNames(all))
		}
	}
	return chosen, nil
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
