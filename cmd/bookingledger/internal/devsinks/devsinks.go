package devsinks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"bookingledger/cmd/bookingledger/internal/cmdline"
)

const devSinksUsage = `Usage: bookingledger dev-sinks [--only NAME,...] [--env-file PATH]

Starts local stand-ins for the systems bookingledger talks to, each on a loopback port of its own
(never a public address), prints the environment lines that point serve at them (KEY=VALUE, one a
line, then "dev-sinks: ready"), optionally writes the same lines to --env-file, and then prints one
line per thing a sink receives until interrupted (SIGINT, SIGTERM). With --state-dir each sink's
port is kept in DIR/dev-sinks.ports and taken again next time while it is free, so the printed
environment stays the same across restarts (make run keeps it in .pgdata). For development and the
README tour only: sinks keep what they receive in memory and accept anything. Sinks: %s.`

// devSink is one local stand-in. Each lives in its own file (devsink_<name>.go) and is listed once in
// devSinks; start listens on devSinkAddr(ctx) and returns the environment lines for serve (naming its
// 127.0.0.1:port) and the function that stops it. report prints one line per received message; it is
// safe for concurrent use.
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

func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	all := devSinks()
	f := cmdline.NewEnvFlags("dev-sinks", getenv, stderr, fmt.Sprintf(devSinksUsage, devSinkNames(all)))
	only := f.String("only", []string{"BOOKINGLEDGER_DEV_SINKS"}, "", "comma-separated sinks to start (default: all)")
	envFile := f.String("env-file", []string{"BOOKINGLEDGER_DEV_SINKS_ENV_FILE"}, "", "also write the environment lines to this file")
	stateDir := f.String("state-dir", []string{"BOOKINGLEDGER_DEV_SINKS_STATE_DIR"}, "", "keep each sink's port in this directory and reuse it next time while free (default: new ports each start)")
	rest, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return cmdline.UsageErrorf("dev-sinks takes no arguments, got %q", rest)
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
	ports, err := readSinkPorts(*stateDir)
	if err != nil {
		return err
	}
	for _, s := range chosen {
		name := s.name
		report := func(format string, args ...any) { out(name+": "+format, args...) }
		e, stop, err := s.start(withDevSinkAddr(ctx, ports[name]), report)
		if err != nil && ports[name] != "" {
			// The port of last time is taken (another program, a sink still shutting down): a new
			// one, said out loud, since whatever was pointed at the old address now misses.
			report("%s is not free (%v); listening on a new port", ports[name], err)
			e, stop, err = s.start(ctx, report)
		}
		if err != nil {
			return fmt.Errorf("dev-sinks: start %s: %w", s.name, err)
		}
		stops = append(stops, stop)
		env = append(env, e...)
		if addr := loopbackAddrIn(e); addr != "" {
			ports[name] = addr
		}
	}
	if err := writeSinkPorts(*stateDir, ports); err != nil {
		return err
	}
	sort.Strings(env)
	env = compactStrings(env) // two sinks may both allow private targets
	if *envFile != "" {
		// Written atomically: run.sh waits for the file, then reads it whole.
		if err := writeFileAtomic(*envFile, []byte(strings.Join(env, "\n")+"\n")); err != nil {
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
			return nil, cmdline.UsageErrorf("dev-sinks: unknown sink %q (have %s)", n, devSinkNames(all))
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

type devSinkAddrKey struct{}

func withDevSinkAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, devSinkAddrKey{}, addr)
}

// devSinkAddr is the address a sink listens on: the one it had last time (--state-dir), else ""
// for a free loopback port.
func devSinkAddr(ctx context.Context) string {
	addr, _ := ctx.Value(devSinkAddrKey{}).(string)
	return addr
}

// SinkPortsFile keeps, per sink, the address it listened on, one "name 127.0.0.1:port" a line.
const SinkPortsFile = "dev-sinks.ports"

var loopbackAddr = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)

// loopbackAddrIn finds the sink's listen address in its environment lines (every sink names it there:
// the environment is how serve reaches it).
func loopbackAddrIn(env []string) string {
	for _, line := range env {
		if a := loopbackAddr.FindString(line); a != "" {
			return a
		}
	}
	return ""
}

func readSinkPorts(dir string) (map[string]string, error) {
	ports := map[string]string{}
	if dir == "" {
		return ports, nil
	}
	raw, err := os.ReadFile(filepath.Join(dir, SinkPortsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return ports, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dev-sinks: read ports: %w", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		name, addr, ok := strings.Cut(strings.TrimSpace(line), " ")
		// Only a loopback address is taken from the file: a sink never listens anywhere else.
		if ok && loopbackAddr.FindString(addr) == addr {
			ports[name] = addr
		}
	}
	return ports, nil
}

func writeSinkPorts(dir string, ports map[string]string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("dev-sinks: state dir: %w", err)
	}
	names := make([]string, 0, len(ports))
	for n := range ports {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %s\n", n, ports[n])
	}
	if err := writeFileAtomic(filepath.Join(dir, SinkPortsFile), []byte(b.String())); err != nil {
		return fmt.Errorf("dev-sinks: write ports: %w", err)
	}
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// reportChange prints an API fake's request unless it is a read that succeeded or a delivery `send`
// gave the fake: serve's provider sync and subscription watch read the fakes every few seconds, make
// run's sends tell the fakes what they tell serve, and what a reader of make run's output wants to see
// is what changed at the provider (a subscription created or disabled) and what failed.
func reportChange(report func(string, ...any), method, path string, status int) {
	if status < 400 && (method == http.MethodGet || strings.Contains(path, "/_fake/deliveries") || strings.HasPrefix(path, "/_fake/webhooks/")) {
		return // a read, or what `send` told the fake besides serve (it prints its own line for --missed)
	}
	report("%s %s %d", method, path, status)
}

// Names are the sinks' names, as --only takes them.
func Names() []string {
	var names []string
	for _, s := range devSinks() {
		names = append(names, s.name)
	}
	return names
}
