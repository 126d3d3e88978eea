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

// ReceiptBodies is the receipts' owner's part of erasure and retention (adapters/postgres.Store),
// each in the caller's transaction.
type ReceiptBodies interface {
	// EraseReceiptBodies erases every body of the subjects' receipts, shared and inline, as erased at
	// at, and says how many of each.
	EraseReceiptBodies(ctx context.Context, tx pgx.Tx, subjects []string, at time.Time) (shared, inline int64, err error)
	// ShredReceiptBodies erases up to limit shared bodies stored before cutoff and returns how many,
	// and their subjects.
	ShredReceiptBodies(ctx context.Context, tx pgx.Tx, cutoff, at time.Time, limit int) (int64, []string, error)
	// ShredInlineReceiptBodies erases up to limit inline bodies of receipts received before cutoff,
	// in id order after receipt after, and returns how many and the last id.
	ShredInlineReceiptBodies(ctx context.Context, tx pgx.Tx, cutoff, at time.Time, after int64, limit int) (int64, int64, error)
	// SealingKeys returns the data keys that seal a stored body of the subjects, each with its
	// subject.
	SealingKeys(ctx context.Context, tx pgx.Tx, subjects []string) (keySubjects []string, keys [][16]byte, err error)
}

// Contacts is the contacts' owner's part of an erasure (adapters/postgres.Store).
type Contacts interface {
	// BookingsWithEmail returns every booking whose contact or seat's contact has the address.
	BookingsWithEmail(ctx context.Context, tx pgx.Tx, email string) ([]string, error)
	// EraseContacts deletes the subjects' contacts and says how many.
	EraseContacts(ctx context.Context, tx pgx.Tx, subjects []string) (int64, error)
}

// Owners are the owners of the tables an erasure changes besides this package's own (subject_keys,
// free_texts, erasures, erased_subjects): each erases its part in the erasure's one transaction.
type Owners struct {
	Receipts ReceiptBodies
	Contacts Contacts
	// Steps skips the subjects' pending invitee steps and clears their steps' errors
	// (adapters/postgres/stepstore.EraseSteps).
	Steps func(ctx context.Context, tx pgx.Tx, subjects []string, at time.Time) (skipped, cleared int64, err error)
	// CalendarRows scrubs cancel reasons from the subjects' calendar rows
	// (adapters/postgres/readmodel.EraseCancelReasons).
	CalendarRows func(ctx context.Context, tx pgx.Tx, subjects []string) (int64, error)
}

func (o Owners) complete() bool {
	return o.Receipts != nil && o.Contacts != nil && o.Steps != nil && o.CalendarRows != nil
}

// Eraser erases subjects: one transaction per request, serialized with ingest of the same bookings
// by their erasure locks (migrations 0131, 0600).
type Eraser struct {
	pool   *pgxpool.Pool
	owners Owners
	// forget, when set, drops the data keys this process cached for the erased subjects.
	forget func(subjects []string)
}

// NewEraser returns an eraser on pool that erases through owners; bodies, when set, is this process's
// sealer, whose cached keys of erased subjects are dropped. An eraser without owners only lists
// erasures.
func NewEraser(pool *pgxpool.Pool, bodies *Bodies, owners Owners) *Eraser {
	e := &Eraser{pool: pool, owners: owners}
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
	if !e.owners.complete() {
		return Erasure{}, errors.New("erase: the tables' owners are not configured")
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
		c, err := e.scrub(ctx, tx, bookings, now)
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
	// A seated booking's attendees are its subjects too: their bodies hold every attendee.
	bookings, err := e.owners.Contacts.BookingsWithEmail(ctx, tx, req.Email)
	if err != nil {
		return nil, err
	}
	if len(bookings) == 0 {
		return nil, ErrNothingToErase
	}
	return bookings, nil
}

// scrub removes the bookings' personal data in tx, marking it erased at now: the data keys and free
// texts here, every other table through its owner, in one order.
func (e *Eraser) scrub(ctx context.Context, tx pgx.Tx, bookings []string, now time.Time) (Counts, error) {
	var c Counts
	tag, err := tx.Exec(ctx, `DELETE FROM subject_keys WHERE subject = ANY($1)`, bookings)
	if err != nil {
		return c, fmt.Errorf("scrub: data keys: %w", err)
	}
	c.DataKeys = tag.RowsAffected()
	if c.Bodies, c.InlineBodies, err = e.owners.Receipts.EraseReceiptBodies(ctx, tx, bookings, now); err != nil {
		return c, fmt.Errorf("scrub: %w", err)
	}
	tag, err = tx.Exec(ctx, `UPDATE free_texts SET text = '', erased_at = $2 WHERE booking = ANY($1) AND erased_at IS NULL`, bookings, now)
	if err != nil {
		return c, fmt.Errorf("scrub: free texts: %w", err)
	}
	c.FreeTexts = tag.RowsAffected()
	if c.Contacts, err = e.owners.Contacts.EraseContacts(ctx, tx, bookings); err != nil {
		return c, fmt.Errorf("scrub: %w", err)
	}
	if c.StepsSkipped, c.StepErrors, err = e.owners.Steps(ctx, tx, bookings, now); err != nil {
		return c, fmt.Errorf("scrub: %w", err)
	}
	if c.ReadModel, err = e.owners.CalendarRows(ctx, tx, bookings); err != nil {
		return c, fmt.Errorf("scrub: %w", err)
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
