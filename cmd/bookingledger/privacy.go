package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"bookingledger/adapters/jobs"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/privacy"
	"bookingledger/domain/booking"
)

const eraseUsage = `Usage: bookingledger erase --booking B [--dry-run] [--by WHO] [--json] [flags]
       bookingledger erase --email E [--dry-run] [--by WHO] [--json] [flags]

Erases the personal data of one booking, or of every booking whose invitee contact has the address
(docs/operations/personal-data.md): deletes the data keys of their receipt bodies and replaces the
bodies by a tombstone, empties their kept cancel and rejection reasons, deletes their contacts,
skips their pending invitee emails and records the erasure (who, when, which bookings; no personal
data). The events stay: they hold no personal data. --dry-run says what would go and keeps
everything. Running it again is safe: nothing is left to remove.`

func runErase(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newEnvFlags("erase", getenv, stderr, eraseUsage)
	dbURL := f.Secret("database-url", []string{envDatabaseURL, envDatabaseURLFallback}, "PostgreSQL URL")
	bookingID := f.String("booking", []string{"BOOKINGLEDGER_ERASE_BOOKING"}, "", "the booking to erase (e.g. calendly-demo-1)")
	email := f.String("email", []string{"BOOKINGLEDGER_ERASE_EMAIL"}, "", "erase every booking whose invitee contact has this address")
	by := f.String("by", []string{"BOOKINGLEDGER_ERASE_BY", "BOOKINGLEDGER_OPERATOR"}, cliOperator(getenv), "who asks, recorded with the erasure")
	dry := f.Bool("dry-run", []string{"BOOKINGLEDGER_ERASE_DRY_RUN"}, "list what would be erased and keep everything")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("erase takes no arguments, got %q (use --booking or --email)", pos)
	}
	if (*bookingID == "") == (*email == "") {
		return usageErrorf("erase wants exactly one of --booking and --email")
	}
	if *dbURL == "" {
		return errNoDatabaseURL()
	}
	who := *by
	pool, err := openMigratedPool(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	er, err := privacy.NewEraser(pool, nil, erasureOwners(pool)).Erase(ctx, privacy.Request{Booking: booking.ID(*bookingID), Email: *email, By: who, DryRun: *dry})
	if errors.Is(err, privacy.ErrNothingToErase) {
		// Idempotent: an address erased before has no contact left. Never echo the address.
		fmt.Fprintln(stdout, "nothing to erase: no booking has a contact with that address (never known, or erased already)")
		return nil
	}
	if errors.Is(err, privacy.ErrInvalidErasure) {
		return usageErrorf("%v", err)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSONTo(stdout, er)
	}
	verb := "erased"
	switch {
	case er.DryRun:
		verb = "would erase"
	case er.ID == 0:
		verb = "nothing left to erase (erased before)"
	}
	c := er.Counts
	fmt.Fprintf(stdout, "%s: %s\n", verb, strings.Join(er.Bookings, " "))
	fmt.Fprintf(stdout, "  data keys %d, receipt bodies %d (+%d inline), free texts %d, contacts %d, steps skipped %d, step errors cleared %d, read-model rows %d\n",
		c.DataKeys, c.Bodies, c.InlineBodies, c.FreeTexts, c.Contacts, c.StepsSkipped, c.StepErrors, c.ReadModel)
	if er.ID != 0 {
		fmt.Fprintf(stdout, "  recorded as erasure %d (subject.erased) by %s at %s\n", er.ID, er.By, er.ErasedAt.Format("2006-01-02T15:04:05Z"))
	}
	return nil
}

const keysUsage = `Usage: bookingledger keys generate [--id ID]
       bookingledger keys rewrap [flags]

Receipt bodies are stored encrypted with a data key per booking; data keys are wrapped by a master key
of BOOKINGLEDGER_MASTER_KEY ("id:base64,...", newest first; each 32 random bytes). generate prints a
new entry to put first in the list. rewrap wraps every data key with the newest master key; after it,
the older ones can be removed from the list (docs/operations/personal-data.md#rotating-the-master-key).`

func runKeys(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newEnvFlags("keys", getenv, stderr, keysUsage)
	dbURL := f.Secret("database-url", []string{envDatabaseURL, envDatabaseURLFallback}, "PostgreSQL URL")
	id := f.String("id", []string{"BOOKINGLEDGER_KEYS_ID"}, "", "generate: the new key's id (default: k<unix time>)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("keys wants one action: generate or rewrap")
	}
	switch pos[0] {
	case "generate":
		kid := *id
		if kid == "" {
			kid = fmt.Sprintf("k%d", time.Now().Unix())
		}
		if err := privacy.ValidateKeyID(kid); err != nil {
			return usageErrorf("--id: %v", err)
		}
		fmt.Fprintln(stdout, privacy.GenerateMasterKey(kid))
		return nil
	case "rewrap":
		ring, err := loadKeyring(getenv)
		if err != nil {
			return err
		}
		pool, err := openMigratedPool(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		n, err := privacy.Rewrap(ctx, pool, ring)
		if err != nil {
			return fmt.Errorf("rewrap: %w", err)
		}
		counts, err := privacy.KeyCounts(ctx, pool)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "rewrapped %d data keys with master key %q\n", n, ring.Newest())
		for _, c := range counts {
			fmt.Fprintf(stdout, "  master key %s wraps %d data keys\n", c.KEK, c.Keys)
		}
		return nil
	}
	return usageErrorf("keys: unknown action %q (generate or rewrap)", pos[0])
}

// loadKeyring reads BOOKINGLEDGER_MASTER_KEY; a missing or malformed one is a configuration error.
func loadKeyring(getenv func(string) string) (*privacy.Keyring, error) {
	ring, err := privacy.ParseKeyring(getenv(privacy.EnvMasterKey))
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return ring, nil
}

// openBodies is the sealer of receipt bodies on pool, checked against the stored data keys: a master
// key that is missing or wrong for them fails here, before anything is read or written.
func openBodies(ctx context.Context, pool *pgxpool.Pool, ring *privacy.Keyring) (*privacy.Bodies, error) {
	b := privacy.NewBodies(pool, ring)
	if err := b.Check(ctx); err != nil {
		return nil, fmt.Errorf("master key check: %w", err)
	}
	return b, nil
}

// sealReceipts makes store open (and seal) bodies when a master key is configured; readers without one
// see sealed bodies as sealed. Commands that write bodies (serve) require the key instead.
func sealReceipts(ctx context.Context, pool *pgxpool.Pool, store *postgres.Store, masterKey string) error {
	if strings.TrimSpace(masterKey) == "" {
		return nil
	}
	ring, err := privacy.ParseKeyring(masterKey)
	if err != nil {
		return usageErrorf("%v", err)
	}
	b, err := openBodies(ctx, pool, ring)
	if err != nil {
		return err
	}
	store.WithBodySealer(b)
	return nil
}

// erasureOwners are the owners of the tables an erasure changes besides privacy's own: the receipts
// and contacts (adapters/postgres), the process steps and the calendar rows.
func erasureOwners(pool *pgxpool.Pool) privacy.Owners {
	store := postgres.NewStore(pool)
	return privacy.Owners{Receipts: store, Contacts: store, Steps: stepstore.EraseSteps, CalendarRows: readmodel.EraseCancelReasons}
}

// retentionInterval is how often the retention job looks for bodies past their age.
const retentionInterval = time.Hour

// retentionKinds is the retention job's queue when a retention is configured.
func retentionKinds(pool *pgxpool.Pool, retention time.Duration) []jobs.Kind {
	if retention <= 0 {
		return nil
	}
	return []jobs.Kind{{Queue: privacy.RetentionQueue, Workers: 1,
		Register: func(w *river.Workers) error {
			return river.AddWorkerSafely(w, &privacy.RetentionWorker{Pool: pool, Receipts: postgres.NewStore(pool), Retention: retention})
		},
		Periodic: []*river.PeriodicJob{privacy.RetentionJob(retentionInterval)}}}
}
