package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"

	"bookingledger/cmd/bookingledger/internal/admincmd"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/devsinks"
	"bookingledger/cmd/bookingledger/internal/relaycmd"
	"bookingledger/cmd/bookingledger/internal/sendcmd"
	"bookingledger/cmd/bookingledger/internal/serve"
	"bookingledger/cmd/bookingledger/internal/stepscmd"
	"bookingledger/cmd/bookingledger/internal/synccmd"
)

const usageText = `bookingledger records booking webhooks in an event-sourced ledger.

Usage:
  bookingledger serve    [flags]   migrate the database, then serve webhooks, /healthz, /readyz (public
                                   listener) and the read API (/api/...), /metrics (admin listener), and
                                   keep the calendar projection current
  bookingledger migrate  [flags]   apply pending database migrations and exit
  bookingledger send <provider> <event> [flags]
                                   sign and post a realistic webhook delivery (demo and smoke tests)
  bookingledger history <booking> [--json]
                                   a booking's receipts, events (arrival and fold order) and findings
  bookingledger calendar --from RFC3339 --to RFC3339 [--resource R] [--json]
                                   the calendar read model in a window, every status
  bookingledger reconcile list [--json]
  bookingledger reconcile resolve <id> --note "..." [--action mark-done|retry|skip] [--by WHO]
                                   the open reconciliation items; close one with a note (a process
                                   step's item with an action)
  bookingledger receipts list [--outcome O] [--provider P] [--json]
  bookingledger receipts show <id> [--json]
                                   delivery receipts (quarantined, deferred, …); one with its body
  bookingledger steps [--state S] [--json]
                                   process steps (calendar events, emails) with key, state, attempts
  bookingledger token create --name N --scope read|admin [--expires 90d]
  bookingledger token list | token revoke <id|name>
                                   bearer tokens of /api/ and the UI (the token is printed once)
  bookingledger resources link <name> <provider-resource>... | unlink <name> [<provider-resource>...]
  bookingledger resources list | show <name> | apply <file.json>
                                   linked resources: one host's calendars at several providers guarded
                                   as one calendar (each change an event on the "resources" stream)
  bookingledger rebuild [calendar|process|relay|all] [--quiet]
                                   replay the event log into an emptied read model (stop serve first)
  bookingledger dev-sinks [--only NAME,...] [--env-file PATH] [--state-dir DIR]
                                   local stand-ins (SMTP, CalDAV, ...) for development; prints serve's env
  bookingledger endpoints add --url URL [--types PATTERNS] [--description TEXT]
  bookingledger endpoints update ID [--url URL] [--types PATTERNS] [--description TEXT]
  bookingledger endpoints list | disable ID | enable ID | rotate-secret ID | remove ID
                                   the relay's endpoints: every ledger event, signed, to the user's own URLs
  bookingledger deliveries [--endpoint ID] [--state dead] [--booking B]
  bookingledger deliveries retry <id>
                                   relay deliveries, their state and attempts; send one again now
  bookingledger replay --endpoint ID --from RFC3339 --to RFC3339 [--types P] [--only-failed] [--dry-run]
                                   send an endpoint's deliveries of a time window again (same webhook-ids)
  bookingledger sync <provider> --from RFC3339 --to RFC3339 [--dry-run] [--json]
                                   read the provider's API and record what its webhooks missed
  bookingledger providers connect <provider> --url URL | providers status [--json]
                                   create or repair the provider's webhook subscription; show each
                                   provider's subscriptions, last delivery and last sync
  bookingledger erase --booking B | --email E [--dry-run] [--by WHO] [--json]
                                   erase a person's data: data keys, bodies, reasons, contacts
  bookingledger keys generate [--id ID] | keys rewrap
                                   master keys of the receipt bodies' encryption (BOOKINGLEDGER_MASTER_KEY)
  bookingledger version            print the build's version
  bookingledger help               print this text

Run 'bookingledger <command> -h' for a command's flags. Every flag defaults to an environment
variable; provider secrets are read from the environment only (see docs/api.md).
`

// run is the whole program; main only supplies the process's context, arguments, environment and
// streams.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return cmdline.UsageErrorf("no command given")
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "serve":
		err = serve.RunServe(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		err = serve.RunMigrate(ctx, rest, getenv, stdout, stderr)
	case "send":
		err = sendcmd.Run(ctx, rest, getenv, stdout, stderr)
	case "history":
		err = admincmd.RunHistory(ctx, rest, getenv, stdout, stderr)
	case "calendar":
		err = admincmd.RunCalendar(ctx, rest, getenv, stdout, stderr)
	case "reconcile":
		err = admincmd.RunReconcile(ctx, rest, getenv, stdout, stderr)
	case "receipts":
		err = admincmd.RunReceipts(ctx, rest, getenv, stdout, stderr)
	case "rebuild":
		err = serve.RunRebuild(ctx, rest, getenv, stdout, stderr)
	case "steps":
		err = stepscmd.RunSteps(ctx, rest, getenv, stdout, stderr)
	case "dev-sinks":
		err = devsinks.Run(ctx, rest, getenv, stdout, stderr)
	case "endpoints":
		err = relaycmd.RunEndpoints(ctx, rest, getenv, stdout, stderr)
	case "deliveries":
		err = relaycmd.RunDeliveries(ctx, rest, getenv, stdout, stderr)
	case "replay":
		err = relaycmd.RunReplay(ctx, rest, getenv, stdout, stderr)
	case "token":
		err = admincmd.RunToken(ctx, rest, getenv, stdout, stderr)
	case "resources":
		err = admincmd.RunResources(ctx, rest, getenv, stdout, stderr)
	case "sync":
		err = synccmd.RunSync(ctx, rest, getenv, stdout, stderr)
	case "providers":
		err = synccmd.RunProviders(ctx, rest, getenv, stdout, stderr)
	case "erase":
		err = admincmd.RunErase(ctx, rest, getenv, stdout, stderr)
	case "keys":
		err = admincmd.RunKeys(ctx, rest, getenv, stdout, stderr)
	case "version", "-version", "--version":
		err = runVersion(rest, getenv, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText)
	default:
		fmt.Fprint(stderr, usageText)
		return cmdline.UsageErrorf("unknown command %q", cmd)
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// buildRevision is the git revision `make build` stamps with -ldflags -X (a linker-set constant, never
// assigned at run time): the fallback where the toolchain embedded no VCS information.
var buildRevision string

// version describes the build from the information the Go toolchain embeds, else the revision make
// stamped.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "bookingledger (unknown build)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	out := "bookingledger " + v
	switch {
	case rev != "":
		out += " (" + rev + " " + at + dirty + ")"
	case buildRevision != "":
		out += " (" + buildRevision + ")"
	}
	return out + " " + bi.GoVersion
}

const versionUsage = `Usage: bookingledger version

Prints the build's version: the module version, the git revision (and whether the tree was
modified) and the Go toolchain.`

func runVersion(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	pos, err := cmdline.NewEnvFlags("version", getenv, stderr, versionUsage).Parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmdline.UsageErrorf("version takes no arguments, got %q", pos)
	}
	_, err = fmt.Fprintln(stdout, version())
	return err
}
