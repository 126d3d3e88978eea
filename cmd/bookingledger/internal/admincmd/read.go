package admincmd

import (
	"bookingledger/adapters/postgres/stepstore"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/cmd/bookingledger/internal/relaycmd"
	"bookingledger/cmd/bookingledger/internal/stepscmd"
	"bookingledger/domain/booking"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
)

// The read-side subcommands (history, calendar, reconcile, rebuild) work on the read model that serve
// keeps up to date, in the same database, over the same event store; they never migrate.

const historyUsage = `Usage: bookingledger history <booking> [--json] [flags]

Prints a booking as an auditor reads it: its current calendar state; every delivery receipt that named
it (duplicates and quarantined deliveries included) with the secret that verified it; its events in
arrival order next to the order the fold applied them; and the findings, each with its reason (a
duplicate delivery, an event that arrived out of order, a create refused after the cancel, a slot
conflict). <booking> is the bookingledger booking ID, with its provider's prefix: calendly-<invitee>,
calcom-<uid>, acuity-<id>, standard-<id>, stripe-<payment intent>. --json prints the document
GET /api/bookings/{booking}/history answers.`

func RunHistory(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("history", getenv, stderr, historyUsage)
	sf := ledgerdb.RegisterStoreFlags(f, ledgerdb.UsesEvents)
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON (the HTTP API's shape) instead of the timeline")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cmdline.UsageErrorf("history wants one booking ID, got %q", pos)
	}
	id := booking.ID(pos[0])
	if err := id.Validate(); err != nil {
		return cmdline.UsageErrorf("history: %w", err)
	}
	rs, err := ledgerdb.OpenReadSide(ctx, sf, stderr)
	if err != nil {
		return err
	}
	defer rs.Close()
	h, err := rs.RM.History(ctx, id)
	switch {
	case errors.Is(err, projections.ErrNotFound):
		return fmt.Errorf("history: no event, receipt or calendar row names booking %q (booking IDs carry the provider's prefix, e.g. calendly-<invitee id>): %w", id, err)
	case err != nil:
		return fmt.Errorf("history: %w", err)
	}
	if *asJSON {
		return readapi.WriteHistoryJSON(stdout, h)
	}
	if err := history.WriteTimeline(stdout, h); err != nil {
		return err
	}
	return relaycmd.WriteBookingDeliveries(ctx, rs.Pool, id, stdout)
}

const calendarUsage = `Usage: bookingledger calendar --from RFC3339 --to RFC3339 [--resource R] [--limit N] [--cursor C] [--json] [flags]

Prints the calendar read model: one line per booking and resource whose slot overlaps [from, to), of
every status (active, conflict, canceled, …), ordered by start. The window is at most 366 days.
--resource limits it to one host calendar (e.g. https://api.calendly.com/users/<host>). It prints one
page of at most --limit entries; when more follow it says so on stderr with the --cursor that prints
the next page (--json: has_more and next_cursor). --json prints the document GET /api/calendar answers.`

func RunCalendar(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("calendar", getenv, stderr, calendarUsage)
	sf := ledgerdb.RegisterStoreFlags(f, ledgerdb.StoreNone)
	from := f.String("from", []string{"BOOKINGLEDGER_CALENDAR_FROM"}, "", "window start, RFC 3339 (required)")
	to := f.String("to", []string{"BOOKINGLEDGER_CALENDAR_TO"}, "", "window end, RFC 3339, exclusive (required)")
	resource := f.String("resource", []string{"BOOKINGLEDGER_CALENDAR_RESOURCE"}, "", "only this resource (host calendar)")
	limit := f.Int64("limit", []string{"BOOKINGLEDGER_CALENDAR_LIMIT"}, calendar.DefaultCalendarPage, 1, "entries per page (at most 10000)")
	cursor := f.String("cursor", []string{"BOOKINGLEDGER_CALENDAR_CURSOR"}, "", "print the page after this cursor (from the previous page)")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON (the HTTP API's shape) instead of a table")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmdline.UsageErrorf("calendar takes no arguments, got %q (use --from and --to)", pos)
	}
	var q calendar.CalendarQuery
	for _, t := range []struct {
		name, value string
		into        *time.Time
	}{{"--from", *from, &q.From}, {"--to", *to, &q.To}} {
		if t.value == "" {
			return cmdline.UsageErrorf("calendar: %s is required (an RFC 3339 time, e.g. 2030-01-07T00:00:00Z)", t.name)
		}
		if *t.into, err = time.Parse(time.RFC3339Nano, t.value); err != nil {
			return cmdline.UsageErrorf("calendar: %s %q is not an RFC 3339 time (e.g. 2030-01-07T00:00:00Z)", t.name, t.value)
		}
	}
	q.Resource = *resource
	if *limit > calendar.MaxCalendarPage {
		return cmdline.UsageErrorf("calendar: --limit %d: at most %d", *limit, calendar.MaxCalendarPage)
	}
	q.Limit = int(*limit)
	if *cursor != "" {
		c, err := calendar.ParseCalendarCursor(*cursor)
		if err != nil {
			return cmdline.UsageErrorf("calendar: --cursor: %w", err)
		}
		q.After = &c
	}
	if err := q.Validate(); err != nil {
		return cmdline.UsageErrorf("calendar: %w", err)
	}
	rs, err := ledgerdb.OpenReadSide(ctx, sf, stderr)
	if err != nil {
		return err
	}
	defer rs.Close()
	page, err := rs.RM.Calendar(ctx, q)
	if err != nil {
		return fmt.Errorf("calendar: %w", err)
	}
	if *asJSON {
		return cmdline.WriteJSON(stdout, readapi.ToCalendar(page))
	}
	if err := calendar.WriteCalendar(stdout, page.Entries); err != nil {
		return err
	}
	if next := page.Next(); next != nil {
		fmt.Fprintf(stderr, "calendar: more entries follow this page of %d; the next page: --cursor %s\n", len(page.Entries), next)
	}
	return nil
}

const reconcileUsage = `Usage: bookingledger reconcile list [--json] [flags]
       bookingledger reconcile resolve <id> --note "…" [--action mark-done|retry|skip] [--by WHO] [--json] [flags]

list prints the open reconciliation items, oldest first: bookings in conflict with the slot's holder,
events kept but refused (a create after its cancel), quarantined deliveries. resolve closes an open
item with an operator's note; an item an operator closed is never reopened for the same cause.
--json prints what GET /api/reconciliation (list) or POST /api/reconciliation/{id}/resolve answers.`

func RunReconcile(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("reconcile", getenv, stderr, reconcileUsage)
	sf := ledgerdb.RegisterStoreFlags(f, ledgerdb.StoreNone)
	note := f.String("note", []string{"BOOKINGLEDGER_RESOLVE_NOTE"}, "", "resolve: why the item is closed (required, at most 4000 bytes)")
	action := f.String("action", []string{"BOOKINGLEDGER_RESOLVE_ACTION"}, "", "resolve a process step's item: mark-done, retry or skip (required for step items, refused for others)")
	by := f.String("by", []string{"BOOKINGLEDGER_OPERATOR"}, cmdline.Operator(getenv), "resolve: who resolves it, recorded with the item")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON (the HTTP API's shape)")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return cmdline.UsageErrorf("reconcile wants an action: list, or resolve <id> --note \"…\"")
	}
	var id int64
	switch pos[0] {
	case "list":
		if len(pos) > 1 {
			return cmdline.UsageErrorf("reconcile list takes no arguments, got %q", pos[1:])
		}
		if err := cmdline.OnlyFor(f, "reconcile list", "resolve", "note", "action", "by"); err != nil {
			return err
		}
	case "resolve":
		if len(pos) != 2 {
			return cmdline.UsageErrorf("reconcile resolve wants one item id, got %q", pos[1:])
		}
		if id, err = strconv.ParseInt(pos[1], 10, 64); err != nil || id <= 0 {
			return cmdline.UsageErrorf("reconcile resolve: item id %q is not a positive integer (see 'bookingledger reconcile list')", pos[1])
		}
		if strings.TrimSpace(*note) == "" {
			return cmdline.UsageErrorf("reconcile resolve: --note is required (say why the item is closed)")
		}
		if len(strings.TrimSpace(*note)) > readmodel.MaxNoteLength {
			return cmdline.UsageErrorf("reconcile resolve: --note is longer than %d bytes", readmodel.MaxNoteLength)
		}
		if *action != "" && !slices.Contains(stepstore.Actions, stepstore.Action(*action)) {
			return cmdline.UsageErrorf("reconcile resolve: unknown --action %q (want %s)", *action, stepscmd.ActionNames())
		}
	default:
		return cmdline.UsageErrorf("reconcile: unknown action %q (want list or resolve)", pos[0])
	}
	rs, err := ledgerdb.OpenReadSide(ctx, sf, stderr)
	if err != nil {
		return err
	}
	defer rs.Close()

	if pos[0] == "list" {
		items, err := rs.RM.OpenItems(ctx)
		if err != nil {
			return fmt.Errorf("reconcile list: %w", err)
		}
		if *asJSON {
			out := readapi.ItemsDTO{Items: make([]readapi.ItemDTO, len(items))}
			for i, it := range items {
				out.Items[i] = readapi.ToItem(it)
			}
			return cmdline.WriteJSON(stdout, out)
		}
		if err := calendar.WriteItems(stdout, items); err != nil {
			return err
		}
		// Deliveries that never became events are receipts, not items: say where they are.
		_, err = fmt.Fprintln(stdout, "\nquarantined and deferred deliveries: bookingledger receipts list --outcome quarantined (or deferred); receipts show <id>")
		return err
	}

	if *action != "" {
		return stepscmd.ResolveStep(ctx, rs, id, *action, *note, *by, *asJSON, stdout)
	}
	it, err := rs.RM.Resolve(ctx, id, *note, *by)
	if err != nil {
		return stepscmd.ResolveError(id, err)
	}
	if *asJSON {
		return cmdline.WriteJSON(stdout, readapi.ToItem(it))
	}
	subject := string(it.Booking)
	if it.OtherBooking != "" {
		subject += " vs " + string(it.OtherBooking)
	}
	if subject == "" && it.ReceiptID != 0 {
		subject = fmt.Sprintf("receipt #%d", it.ReceiptID)
	}
	_, err = fmt.Fprintf(stdout, "closed item %d (%s: %s) at %s by %s\n  reason: %s\n  note:   %s\n",
		it.ID, it.Kind, subject, it.ClosedAt.UTC().Format(time.RFC3339), it.ResolvedBy, it.Reason, it.Note)
	return err
}
