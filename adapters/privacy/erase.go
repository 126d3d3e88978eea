package privacy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/postgres"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// ErrNothingToErase: the request names no booking (an address no contact has).
var ErrNothingToErase = errors.New("no booking found for that request")

// ErrInvalidErasure: the request is malformed (neither or both of booking and email, …).
var ErrInvalidErasure = errors.New("invalid erasure request")

// Request names whose data to erase: one booking, or every booking whose contact has the address.
type Request struct {
	Booking booking.ID
	Email   string
	// By names who asked (a token's name, the CLI's user): recorded, never personal data of the
	// subject.
	By string
	// DryRun computes everything and keeps nothing.
	DryRun bool
}

// Counts says how much an erasure removed (or would remove).
type Counts struct {
	DataKeys     int64 `json:"data_keys"`
	Bodies       int64 `json:"receipt_bodies"`
	InlineBodies int64 `json:"inline_receipt_bodies"`
	FreeTexts    int64 `json:"free_texts"`
	Contacts     int64 `json:"contacts"`
	StepsSkipped int64 `json:"steps_skipped"`
	StepErrors   int64 `json:"step_errors_cleared"`
	ReadModel    int64 `json:"read_model_rows_scrubbed"`
}

// Kinds of erasure (erasures.kind).
const (
	KindSubjectErased = "subject.erased"
	KindRetention     = "retention"
)

// ErasureKinds lists every kind: erasures.kind's CHECK list (a test compares them).
var ErasureKinds = []string{KindSubjectErased, KindRetention}

// Erasure is what one request did: the subject.erased fact.
type Erasure struct {
	ID int64 `json:"id,omitempty"` // 0 for a dry run
	// Kind is "subject.erased" (a request) or "retention" (bodies past BOOKINGLEDGER_RECEIPT_BODY_RETENTION).
	Kind     string    `json:"kind"`
	ErasedAt time.Time `json:"erased_at"`
	By       string    `json:"erased_by"`
	Bookings []string  `json:"bookings"`
	Counts   Counts    `json:"counts"`
	DryRun   bool      `json:"dry_run,omitempty"`
}

// Eraser erases subjects: one transaction per request, serialized with ingest of the same bookings
// by their erasure locks (migration 0131).
type Eraser struct {
	pool *pgxpool.Pool
	// forget, when set, drops the data keys this process cached for the erased subjects.
	forget func(subjects []string)
}

// NewEraser returns an eraser on pool; bodies, when set, is this process's sealer, whose cached keys of
// erased subjects are dropped.
func NewEraser(pool *pgxpool.Pool, bodies *Bodies) *Eraser {
	e := &Eraser{pool: pool}
	if bodies != nil {
		e.forget = bodies.Forget
	}
	return e
}

// Erase removes the personal data of the request's bookings: their data keys (every sealed body of
// theirs becomes unreadable) and bodies (replaced by a tombstone, inline copies included), their kept
// free texts, their contacts, the errors of their steps, cancel reasons of older events from the read
// model; their pending invitee steps are skipped. It records the subject.erased fact. Running it
// again finds nothing more to remove and records nothing new when nothing was left.
func (e *Eraser) Erase(ctx context.Context, req Request) (Erasure, error) {
	if (req.Booking == "") == (strings.TrimSpace(req.Email) == "") {
		return Erasure{}, fmt.Errorf("%w: name a booking or an email address, not both", ErrInvalidErasure)
	}
	if req.Booking != "" {
		if err := req.Booking.Validate(); err != nil {
			return Erasure{}, fmt.Errorf("%w: %v", ErrInvalidErasure, err)
		}
	}
	if strings.TrimSpace(req.By) == "" {
		return Erasure{}, fmt.Errorf("%w: who asks is required", ErrInvalidErasure)
	}
	if !ledger.Storable(req.Email) || !ledger.Storable(req.By) {
		return Erasure{}, fmt.Errorf("%w: email and who asks must be UTF-8 without NUL", ErrInvalidErasure)
	}
	var out Erasure
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		bookings, err := e.bookings(ctx, tx, req)
		if err != nil {
			return err
		}
		if err := lockSubjects(ctx, tx, bookings); err != nil {
			return err
		}
		now := time.Now().UTC().Truncate(time.Second)
		c, err := scrub(ctx, tx, bookings, now)
		if err != nil {
			return err
		}
		out = Erasure{Kind: KindSubjectErased, ErasedAt: now, By: req.By, Bookings: bookings, Counts: c, DryRun: req.DryRun}
		if req.DryRun {
			return errDryRun
		}
		var fresh bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM unnest($1::text[]) s WHERE s NOT IN (SELECT subject FROM erased_subjects))`,
			bookings).Scan(&fresh); err != nil {
			return fmt.Errorf("find erased subjects: %w", err)
		}
		if !fresh && c == (Counts{}) {
			return nil // erased before, and nothing came since: nothing to record
		}
		counts, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("encode counts: %w", err)
		}
		if err := tx.QueryRow(ctx, `INSERT INTO erasures (erased_at, erased_by, bookings, counts) VALUES ($1, $2, $3, $4) RETURNING id`,
			now, req.By, bookings, counts).Scan(&out.ID); err != nil {
			return fmt.Errorf("record erasure: %w", err)
		}
		_, err = tx.Exec(ctx, `INSERT INTO erased_subjects (subject, erasure, erased_at) SELECT s, $2, $3 FROM unnest($1::text[]) s
ON CONFLICT (subject) DO NOTHING`, bookings, out.ID, now)
		if err != nil {
			return fmt.Errorf("record erased subjects: %w", err)
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		return out, nil
	}
	if err != nil {
		return Erasure{}, fmt.Errorf("erase: %w", err)
	}
	if e.forget != nil {
		e.forget(out.Bookings)
	}
	return out, nil
}

var errDryRun = errors.New("dry run")

// bookings resolves the request: the booking itself, or every booking whose contact (or a seat's
// contact) has the address (case-insensitive, spaces around it ignored). An address erased before has no contact left:
// ErrNothingToErase, as for one never known.
func (e *Eraser) bookings(ctx context.Context, tx pgx.Tx, req Request) ([]string, error) {
	if req.Booking != "" {
		return []string{string(req.Booking)}, nil
	}
	// A seated booking's attendees are its subjects too (seat_contacts): their bodies hold every attendee.
	rows, err := tx.Query(ctx, `SELECT booking FROM contacts WHERE lower(email) = lower($1)
UNION SELECT booking FROM seat_contacts WHERE lower(email) = lower($1) ORDER BY booking`, strings.TrimSpace(req.Email))
	if err != nil {
		return nil, fmt.Errorf("find bookings: %w", err)
	}
	bookings, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find bookings: %w", err)
	}
	if len(bookings) == 0 {
		return nil, ErrNothingToErase
	}
	return bookings, nil
}

// scrub removes the bookings' personal data in tx, marking it erased at now.
func scrub(ctx context.Context, tx pgx.Tx, bookings []string, now time.Time) (Counts, error) {
	var c Counts
	tomb := postgres.ErasedForm(now)
	day := now.Format(time.DateOnly)
	steps := []struct {
		n    *int64
		sql  string
		args []any
	}{
		{&c.DataKeys, `DELETE FROM subject_keys WHERE subject = ANY($1)`, nil},
		// Every body stored for a receipt of the bookings, sealed or stored before sealing began. The
		// two ways to find them are a union: as an OR, the plan reads every body.
		{&c.Bodies, `UPDATE receipt_bodies b SET body = $2, key_id = NULL, erased_at = $3
WHERE b.digest IN (SELECT digest FROM receipt_bodies WHERE subject = ANY($1)
    UNION ALL SELECT r.body_digest FROM receipts r WHERE r.body_digest IS NOT NULL AND (r.bookings && $1 OR r.pending_booking = ANY($1)))
  AND b.erased_at IS NULL`, []any{tomb, now}},
		{&c.InlineBodies, `UPDATE receipts SET body = $2, body_erased_at = $3 WHERE body IS NOT NULL AND (bookings && $1 OR pending_booking = ANY($1))
  AND body_erased_at IS NULL`, []any{tomb, now}},
		{&c.FreeTexts, `UPDATE free_texts SET text = '', erased_at = $2 WHERE booking = ANY($1) AND erased_at IS NULL`, []any{now}},
		{&c.Contacts, `DELETE FROM contacts WHERE booking = ANY($1)`, nil},
		// A seated booking's attendees' own contacts (counted with the contacts).
		{&c.Contacts, `DELETE FROM seat_contacts WHERE booking = ANY($1)`, nil},
		// An invitee step cannot run without the contact: skipped, and says why.
		{&c.StepsSkipped, `UPDATE process_steps SET state = 'skipped', note = 'the invitee''s data was erased on ' || $2,
    finished_at = now(), updated_at = now()
WHERE booking = ANY($1) AND state = 'pending' AND kind LIKE 'invitee_email.%'`, []any{day}},
		// A target's error can quote the address (an SMTP 550 names the mailbox).
		{&c.StepErrors, `UPDATE process_steps SET last_error = '[erased]', updated_at = now() WHERE booking = ANY($1) AND last_error NOT IN ('', '[erased]')`, nil},
		// Events recorded before free text was kept apart carry their reason: the row folded from them does too.
		{&c.ReadModel, `UPDATE calendar_bookings SET cancel_reason = '' WHERE booking = ANY($1) AND cancel_reason <> ''`, nil},
	}
	for _, s := range steps {
		tag, err := tx.Exec(ctx, s.sql, append([]any{bookings}, s.args...)...)
		if err != nil {
			return c, fmt.Errorf("scrub: %w", err)
		}
		*s.n += tag.RowsAffected()
	}
	return c, nil
}

// Erasures lists the recorded erasures, newest first.
func (e *Eraser) Erasures(ctx context.Context, limit int) ([]Erasure, error) {
	rows, err := e.pool.Query(ctx, `SELECT id, kind, erased_at, erased_by, bookings, counts FROM erasures ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list erasures: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Erasure, error) {
		var er Erasure
		var counts []byte
		if err := r.Scan(&er.ID, &er.Kind, &er.ErasedAt, &er.By, &er.Bookings, &counts); err != nil {
			return er, err
		}
		er.ErasedAt = er.ErasedAt.UTC()
		return er, json.Unmarshal(counts, &er.Counts)
	})
	if err != nil {
		return nil, fmt.Errorf("list erasures: %w", err)
	}
	slices.SortFunc(out, func(a, b Erasure) int { return int(b.ID - a.ID) })
	return out, nil
}

// lockSubjects takes the erasure lock of each subject until tx ends, in one order, so that two
// transactions sharing subjects wait instead of deadlocking. Ingest of these subjects waits for the
// commit (bl_subject_erased takes the lock shared).
func lockSubjects(ctx context.Context, tx pgx.Tx, subjects []string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(bl_erasure_lock_key(s)) FROM unnest($1::text[]) AS s`,
		slices.Sorted(slices.Values(subjects)))
	if err != nil {
		return fmt.Errorf("lock %d subjects: %w", len(subjects), err)
	}
	return nil
}
