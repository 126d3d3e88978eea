package cmdline

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"bookingledger/adapters/postgres"
)

// Environment variables read by more than one command.
const (
	EnvDatabaseURL         = "BOOKINGLEDGER_DATABASE_URL"
	EnvDatabaseURLFallback = "DATABASE_URL"
	EnvEventStore          = "BOOKINGLEDGER_EVENT_STORE"
)

func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// Operator is who a resolution from the command line is recorded as by default: the OS user.
func Operator(getenv func(string) string) string {
	if u := strings.TrimSpace(getenv("USER")); u != "" {
		return "cli:" + u
	}
	return "cli"
}

// IsSet reports whether the flag was given on the command line.
// OnlyFor refuses, as a usage error of cmd, the first of names set on f: those flags apply to owner
// only, and a command must not run while ignoring what it was told.
func OnlyFor(f *EnvFlags, cmd, owner string, names ...string) error {
	for _, name := range names {
		if IsSet(f, name) {
			return UsageErrorf("%s: --%s applies to %s only", cmd, name, owner)
		}
	}
	return nil
}

func IsSet(f *EnvFlags, name string) bool {
	set := false
	f.FS.Visit(func(fl *flag.Flag) {
		if fl.Name == name {
			set = true
		}
	})
	return set
}

// ExitSchemaNewer: a newer release migrated the database. Its own status, so that a supervisor can
// stop restarting (systemd: RestartPreventExitStatus=3) instead of looping on a binary that cannot run.
const ExitSchemaNewer = 3

// ExitCode reports err on stderr and returns the process's exit status: 0 on success, 2 for usage and
// configuration errors, 3 when the database schema is newer than the binary, 1 for everything else.
func ExitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "bookingledger: %s\n", strings.ReplaceAll(err.Error(), "\n", "\nbookingledger: "))
	var ue UsageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "Run 'bookingledger help' for usage.")
		return 2
	}
	if errors.Is(err, postgres.ErrSchemaNewer) {
		return ExitSchemaNewer
	}
	return 1
}
