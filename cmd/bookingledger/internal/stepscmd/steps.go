package stepscmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/process"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/projections"
	"bookingledger/projections/history"
)

const stepsUsage = `Usage: bookingledger steps [--state STATE] [--json] [flags]

Lists process steps — what bookingledger did about bookings: host calendar events over CalDAV and
invitee emails over SMTP — newest first (at most 1000), each with its key, kind, state, attempts,
times, last error and note. --state keeps one state: pending, requested, done, needs_reconciliation,
failed or skipped. Steps needing reconciliation are also in 'bookingledger reconcile list'.

bookingledger steps setup creates the hosts' CalDAV calendar collections (see steps setup --help).`

func RunSteps(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "setup" {
		return runStepsSetup(ctx, args[1:], getenv, stdout, stderr)
	}
	f := cmdline.NewEnvFlags("steps", getenv, stderr, stepsUsage)
	sf := ledgerdb.RegisterStoreFlags(f, ledgerdb.StoreNone)
	state := f.String("state", []string{"BOOKINGLEDGER_STEPS_STATE"}, "", "only steps in this state")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmdline.UsageErrorf("steps takes no arguments, got %q", pos)
	}
	if *state != "" && !validState(*state) {
		return cmdline.UsageErrorf("steps: unknown --state %q (want pending, requested, done, needs_reconciliation, failed or skipped)", *state)
	}
	rs, err := ledgerdb.OpenReadSide(ctx, sf, stderr)
	if err != nil {
		return err
	}
	defer rs.Close()
	steps, err := stepstore.NewStore(rs.Pool, nil).List(ctx, process.State(*state))
	if err != nil {
		return fmt.Errorf("steps: %w", err)
	}
	entries := stepstore.Entries(steps)
	if *asJSON {
		out := struct {
			Steps []readapi.StepDTO `json:"steps"`
		}{Steps: []readapi.StepDTO{}}
		for _, e := range entries {
			out.Steps = append(out.Steps, readapi.ToStep(e))
		}
		return cmdline.WriteJSON(stdout, out)
	}
	if _, err := fmt.Fprintf(stdout, "steps (%d)\n", len(entries)); err != nil {
		return err
	}
	history.WriteSteps(stdout, entries)
	return nil
}

func validState(s string) bool {
	for _, st := range process.States {
		if string(st) == s {
			return true
		}
	}
	return false
}

// ResolveStep closes a step's reconciliation item with an action (reconcile resolve --action).
func ResolveStep(ctx context.Context, rs *ledgerdb.ReadSide, id int64, action, note, by string, asJSON bool, stdout io.Writer) error {
	client, err := stepstore.InsertOnlyClient(rs.Pool)
	if err != nil {
		return err
	}
	it, st, err := stepstore.NewStore(rs.Pool, client).Resolve(ctx, id, stepstore.Action(action), note, by)
	if err != nil {
		return ResolveError(id, err)
	}
	if asJSON {
		return cmdline.WriteJSON(stdout, readapi.ToItem(it))
	}
	_, err = fmt.Fprintf(stdout, "closed item %d (step %s %s of %s) by %s: step is now %s\n  reason: %s\n  note:   %s\n",
		it.ID, st.Kind, st.Key, st.Booking, it.ResolvedBy, st.State, it.Reason, it.Note)
	return err
}

func ActionNames() string { return strings.Join(StepActions(), ", ") }

// StepActions are the resolutions of a step item, as the CLI, the API and the UI's form name them.
func StepActions() []string {
	out := make([]string, len(stepstore.Actions))
	for i, a := range stepstore.Actions {
		out[i] = string(a)
	}
	return out
}

// ResolveError says what a failed resolution of item id means to the operator.
func ResolveError(id int64, err error) error {
	switch {
	case errors.Is(err, projections.ErrNotFound):
		return fmt.Errorf("reconcile resolve: there is no reconciliation item %d (see 'bookingledger reconcile list'): %w", id, err)
	case errors.Is(err, projections.ErrItemClosed):
		return fmt.Errorf("reconcile resolve: item %d is closed already; nothing changed: %w", id, err)
	case errors.Is(err, projections.ErrInvalidQuery):
		return cmdline.UsageError{Err: fmt.Errorf("reconcile resolve: %w", err)}
	default:
		return fmt.Errorf("reconcile resolve: %w", err)
	}
}
