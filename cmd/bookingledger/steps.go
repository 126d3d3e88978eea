package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/process"
	"bookingledger/projections/history"
)

const stepsUsage = `Usage: bookingledger steps [--state STATE] [--json] [flags]

Lists process steps — what bookingledger did about bookings: host calendar events over CalDAV and
invitee emails over SMTP — newest first (at most 1000), each with its key, kind, state, attempts,
times, last error and note. --state keeps one state: pending, requested, done, needs_reconciliation,
failed or skipped. Steps needing reconciliation are also in 'bookingledger reconcile list'.

bookingledger steps setup creates the hosts' CalDAV calendar collections (see steps setup --help).`

func runSteps(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "setup" {
		return runStepsSetup(ctx, args[1:], getenv, stdout, stderr)
	}
	f := newEnvFlags("steps", getenv, stderr, stepsUsage)
	sf := registerStoreFlags(f, storeNone)
	state := f.String("state", []string{"BOOKINGLEDGER_STEPS_STATE"}, "", "only steps in this state")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("steps takes no arguments, got %q", pos)
	}
	if *state != "" && !validState(*state) {
		return usageErrorf("steps: unknown --state %q (want pending, requested, done, needs_reconciliation, failed or skipped)", *state)
	}
	rs, err := openReadSide(ctx, sf, stderr)
	if err != nil {
		return err
	}
	defer rs.Close()
	steps, err := stepstore.NewStore(rs.pool, nil).List(ctx, process.State(*state))
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
		return writeJSONTo(stdout, out)
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

// resolveStep closes a step's reconciliation item with an action (reconcile resolve --action).
func resolveStep(ctx context.Context, rs *readSide, id int64, action, note, by string, asJSON bool, stdout io.Writer) error {
	client, err := stepstore.InsertOnlyClient(rs.pool)
	if err != nil {
		return err
	}
	it, st, err := stepstore.NewStore(rs.pool, client).Resolve(ctx, id, stepstore.Action(action), note, by)
	if err != nil {
		return resolveError(id, err)
	}
	if asJSON {
		return writeJSONTo(stdout, readapi.ToItem(it))
	}
	_, err = fmt.Fprintf(stdout, "closed item %d (step %s %s of %s) by %s: step is now %s\n  reason: %s\n  note:   %s\n",
		it.ID, st.Kind, st.Key, st.Booking, it.ResolvedBy, st.State, it.Reason, it.Note)
	return err
}

func actionNames() string { return strings.Join(stepActions(), ", ") }

// stepActions are the resolutions of a step item, as the CLI, the API and the UI's form name them.
func stepActions() []string {
	out := make([]string, len(stepstore.Actions))
	for i, a := range stepstore.Actions {
		out[i] = string(a)
	}
	return out
}

// withSteps adds what the process projection needs outside serve (rebuild): an insert-only job
// client and the targets configured in the environment, as serve would read them.
func withSteps(d projectionDeps, getenv func(string) string) (projectionDeps, error) {
	sc, err := parseSteps(getenv)
	if err != nil {
		return d, err
	}
	if d.jobs, err = stepstore.InsertOnlyClient(d.pool); err != nil {
		return d, err
	}
	d.stepTargets = process.Targets{Calendar: sc.hasCalendar(), Email: sc.mailer != nil}
	return d, nil
}
