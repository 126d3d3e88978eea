package stepscmd

import (
	"context"
	"errors"
	"fmt"
	"io"

	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
)

const stepsSetupUsage = `Usage: bookingledger steps setup [RESOURCE ...] [flags]

Creates the CalDAV calendar collection of each host resource whose calendar steps go to CalDAV
(BOOKINGLEDGER_CALDAV_URL_TEMPLATE; with BOOKINGLEDGER_CALENDARS_FILE, the resources it routes to
caldav), where the server allows it (MKCALENDAR, and MKCOL for missing parents): the resources
named, or every resource the calendar has seen. A collection that exists is left alone. Prints one
line per resource: created, exists or failed, with the collection's URL. bookingledger never creates
a collection while acting on a booking: a missing one fails the step with a reconciliation item.`

// runStepsSetup is `bookingledger steps setup`.
func runStepsSetup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("steps setup", getenv, stderr, stepsSetupUsage)
	sf := ledgerdb.RegisterStoreFlags(f)
	names, err := f.Parse(args)
	if err != nil {
		return err
	}
	sc, err := Parse(getenv)
	if err != nil {
		return err
	}
	if sc.calendar == nil {
		return cmdline.UsageErrorf("steps setup: no CalDAV target (%s is not set)", EnvCalDAVURLTemplate)
	}
	if len(names) == 0 {
		rs, err := ledgerdb.OpenReadSide(ctx, sf, stderr)
		if err != nil {
			return err
		}
		defer rs.Close()
		sc.calendarTarget(rs.Pool) // linked names, for the calendars file's routes
		if names, err = readmodel.NewStepReader(rs.Pool).Resources(ctx); err != nil {
			return fmt.Errorf("steps setup: read resources: %w", err)
		}
	}
	var failed int
	for _, r := range names {
		if sc.routes != nil && sc.routes.choose(r) != targetCalDAV {
			continue
		}
		coll, created, err := sc.calendar.Setup(ctx, r)
		switch {
		case err != nil:
			failed++
			_, err = fmt.Fprintf(stdout, "failed   %s  %s: %v\n", r, coll, err)
		case created:
			_, err = fmt.Fprintf(stdout, "created  %s  %s\n", r, coll)
		default:
			_, err = fmt.Fprintf(stdout, "exists   %s  %s\n", r, coll)
		}
		if err != nil {
			return err
		}
	}
	if failed > 0 {
		return errors.New("steps setup: some collections could not be created (see above)")
	}
	return nil
}
