package admincmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"bookingledger/adapters/privacy"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
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

func RunErase(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("erase", getenv, stderr, eraseUsage)
	dbURL := f.Secret("database-url", []string{cmdline.EnvDatabaseURL, cmdline.EnvDatabaseURLFallback}, "PostgreSQL URL")
	bookingID := f.String("booking", []string{"BOOKINGLEDGER_ERASE_BOOKING"}, "", "the booking to erase (e.g. calendly-demo-1)")
	email := f.String("email", []string{"BOOKINGLEDGER_ERASE_EMAIL"}, "", "erase every booking whose invitee contact has this address")
	by := f.String("by", []string{"BOOKINGLEDGER_ERASE_BY", "BOOKINGLEDGER_OPERATOR"}, cmdline.Operator(getenv), "who asks, recorded with the erasure")
	dry := f.Bool("dry-run", []string{"BOOKINGLEDGER_ERASE_DRY_RUN"}, "list what would be erased and keep everything")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmdline.UsageErrorf("erase takes no arguments, got %q (use --booking or --email)", pos)
	}
	if (*bookingID == "") == (*email == "") {
		return cmdline.UsageErrorf("erase wants exactly one of --booking and --email")
	}
	if *dbURL == "" {
		return ledgerdb.ErrNoDatabaseURL()
	}
	who := *by
	pool, err := ledgerdb.OpenMigratedPool(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	er, err := privacy.NewEraser(pool, nil, ledgerdb.ErasureOwners(pool)).Erase(ctx, privacy.Request{Booking: booking.ID(*bookingID), Email: *email, By: who, DryRun: *dry})
	if errors.Is(err, privacy.ErrNothingToErase) {
		// Idempotent: an address erased before has no contact left. Never echo the address.
		fmt.Fprintln(stdout, "nothing to erase: no booking has a contact with that address (never known, or erased already)")
		return nil
	}
	if errors.Is(err, privacy.ErrInvalidErasure) {
		return cmdline.UsageErrorf("%v", err)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return cmdline.WriteJSON(stdout, er)
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

func RunKeys(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("keys", getenv, stderr, keysUsage)
	dbURL := f.Secret("database-url", []string{cmdline.EnvDatabaseURL, cmdline.EnvDatabaseURLFallback}, "PostgreSQL URL")
	id := f.String("id", []string{"BOOKINGLEDGER_KEYS_ID"}, "", "generate: the new key's id (default: k<unix time>)")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cmdline.UsageErrorf("keys wants one action: generate or rewrap")
	}
	switch pos[0] {
	case "generate":
		kid := *id
		if kid == "" {
			kid = fmt.Sprintf("k%d", time.Now().Unix())
		}
		if err := privacy.ValidateKeyID(kid); err != nil {
			return cmdline.UsageErrorf("--id: %v", err)
		}
		fmt.Fprintln(stdout, privacy.GenerateMasterKey(kid))
		return nil
	case "rewrap":
		ring, err := ledgerdb.LoadKeyring(getenv)
		if err != nil {
			return err
		}
		pool, err := ledgerdb.OpenMigratedPool(ctx, *dbURL)
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
	return cmdline.UsageErrorf("keys: unknown action %q (generate or rewrap)", pos[0])
}
