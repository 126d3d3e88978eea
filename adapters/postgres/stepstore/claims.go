package stepstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/process"
)

// The step workers' reads and writes (process.Steps).
var _ process.Steps = (*Store)(nil)

// QueueLock implements process.Steps: one read locks the step and brings its predecessor.
func (s *Store) QueueLock(b *pgx.Batch, id int64, into *process.Claimed, found *bool) {
	b.Queue(`SELECT `+qualifiedStepColumns+`, p.kind, p.key, p.state, s.claimed_by, s.data_sent_at
FROM process_steps s
LEFT JOIN process_steps p ON p.key = s.after_key
WHERE s.id = $1 FOR UPDATE OF s`, id).Query(func(rows pgx.Rows) error {
		var pred struct {
			kind, state *string
			key         *uuid.UUID
		}
		var claimedBy *string
		var dataSentAt *time.Time
		got, err := scanSteps(rows, &pred.kind, &pred.key, &pred.state, &claimedBy, &dataSentAt)
		if err != nil {
			return fmt.Errorf("process: read step: %w", err)
		}
		if *found = len(got) > 0; !*found {
			return nil
		}
		*into = process.Claimed{Step: got[0], Claimed: claimedBy != nil, DataSent: dataSentAt != nil}
		if pred.state != nil {
			into.Pred = &process.Step{Kind: process.Kind(*pred.kind), Key: *pred.key, State: process.State(*pred.state)}
		}
		return nil
	})
}

// SeatSteps implements process.Steps.
func (s *Store) SeatSteps(ctx context.Context, tx pgx.Tx, booking string) ([]process.Step, error) {
	return stepsOf(ctx, tx, `WHERE booking = $1 AND kind = $2 ORDER BY id FOR UPDATE`, booking, string(process.EmailSeatCancellation))
}

// QueueRequest implements process.Steps. A claim that may have been sent keeps its data_sent_at (the
// worker reads it as unknown); any other starts without one. A non-nil attendees records the attendee
// state (steps.AttendeeDigest) the claim writes.
func (s *Store) QueueRequest(b *pgx.Batch, id int64, lease time.Duration, clientID string, keepDataSent bool, attendees *string, attempts *int, until *time.Time) {
	b.Queue(`UPDATE process_steps SET state = 'requested', attempts = attempts + 1,
requested_at = coalesce(requested_at, now()), lease_until = now() + $2::interval, updated_at = now(),
claimed_by = $3, data_sent_at = CASE WHEN $4 THEN data_sent_at END, attendees = coalesce($5, attendees)
WHERE id = $1 RETURNING attempts, lease_until`, id, lease.String(), clientID, keepDataSent, attendees).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(attempts, until); err != nil {
			return fmt.Errorf("process: mark step requested: %w", err)
		}
		return nil
	})
}

// Record implements process.Steps: the step's row in one statement, and with a needs_reconciliation
// or failed outcome, its item in the same transaction (the calendar's queue, readmodel.OpenItem).
func (s *Store) Record(ctx context.Context, tx pgx.Tx, r process.Record) error {
	item := r.State == process.StateNeedsReconciliation || r.State == process.StateFailed
	if tx == nil && item {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.Record(ctx, tx, r) })
	}
	var q interface {
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	} = s.pool
	if tx != nil {
		q = tx
	}
	var id int64
	err := q.QueryRow(ctx, `UPDATE process_steps SET state = $2, last_error = CASE WHEN $2 = 'done' THEN '' WHEN $3 = '' THEN last_error ELSE $3 END,
note = CASE WHEN $4 = '' THEN note ELSE $4 END,
target_href = CASE WHEN $5 = '' THEN target_href ELSE $5 END, target_etag = CASE WHEN $6 = '' THEN target_etag ELSE $6 END,
lease_until = CASE WHEN $2 = 'requested' THEN now() ELSE NULL END,
finished_at = CASE WHEN $7 THEN now() ELSE NULL END, updated_at = now()
WHERE id = $1 AND (NOT $8 OR state = 'requested')
RETURNING id`, r.Step.ID, string(r.State), r.Error, r.Note, r.Href, r.ETag, r.Finished, r.OnlyRequested).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // no longer the claim's
	case err != nil || !item:
		return err
	}
	return readmodel.OpenItem(ctx, tx, "step", "step "+r.Step.Key.String(), r.Step.Booking, r.Reason)
}

// QueueObject implements process.Steps: one read, after the claim's COMMIT, in its round trip. It
// reads the thread's creates and done updates — a thread holds a few — by the thread's index alone
// (an ORDER BY id in the statement would let a plan walk the primary key instead, which a plan made
// over an empty table does) and finds the object among them (threadObject).
func (s *Store) QueueObject(b *pgx.Batch, thread string, id int64, into *process.ThreadObject, readErr *error) {
	*into, *readErr = process.ThreadObject{}, fmt.Errorf("process: find calendar object: %w", checkpoint.ErrNotAnswered)
	checkpoint.QueueIndexedRead(b, `SELECT id, kind, state, target_href, target_etag, key FROM process_steps
WHERE thread = $1 AND (kind = 'host_calendar.create' OR kind = 'host_calendar.update' AND state = 'done')`, []any{thread},
		func(br pgx.BatchResults) error {
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("process: find calendar object: %w", err)
			}
			var writes []objectWrite
			for rows.Next() {
				var w objectWrite
				if err := rows.Scan(&w.id, &w.kind, &w.state, &w.href, &w.etag, &w.key); err != nil {
					rows.Close()
					return fmt.Errorf("process: find calendar object: %w", err)
				}
				writes = append(writes, w)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("process: find calendar object: %w", err)
			}
			*into, *readErr = threadObject(writes, id), nil
			return nil
		}, readErr)
}

// objectWrite is a create of a thread, or one of its done updates.
type objectWrite struct {
	id                      int64
	kind, state, href, etag string
	key                     uuid.UUID
}

// threadObject finds, among a thread's creates and done updates, the object step id writes: the href
// of the thread's first done create that recorded one, the ETag of the last done write before step
// id, how many updates were done before it, and the key of the first create that wrote that href.
func threadObject(writes []objectWrite, id int64) process.ThreadObject {
	var o process.ThreadObject
	var hrefAt, etagAt int64
	for _, w := range writes {
		done := w.state == string(process.StateDone)
		if done && w.kind == string(process.CalendarCreate) && w.href != "" && (hrefAt == 0 || w.id < hrefAt) {
			o.Href, hrefAt = w.href, w.id
		}
		if done && w.id < id && w.id > etagAt {
			o.ETag, etagAt = w.etag, w.id
		}
		if done && w.kind == string(process.CalendarUpdate) && w.id < id {
			o.Seq++
		}
	}
	var keyAt int64
	for _, w := range writes {
		if o.Href != "" && w.kind == string(process.CalendarCreate) && w.href == o.Href && (keyAt == 0 || w.id < keyAt) {
			o.CreateKey, keyAt = w.key, w.id
		}
	}
	return o
}

// MarkDataSent implements process.Steps.
func (s *Store) MarkDataSent(ctx context.Context, id int64, attempts int) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE process_steps SET data_sent_at = now() WHERE id = $1 AND state = 'requested' AND attempts = $2`, id, attempts)
	return tag.RowsAffected() == 1, err
}
