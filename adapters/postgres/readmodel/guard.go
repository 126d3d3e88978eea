package readmodel

import (
	"context"
	"fmt"
	"time"
)

// The double-booking guard (the exclusion constraints calendar_slots_no_double_booking_0 … _7)
// covers the claims that can still clash: those whose guarded flag is set (migration 0700,
// docs/adr/0022-the-guard-covers-what-can-still-clash.md). The live projection inserts every claim
// guarded. A rebuild loads a claim whose slot ended before its horizon — the database's now() at the
// start of the write, minus GuardMargin — unguarded, so that its GiST builds over the live calendar
// instead of the whole log; SweepGuard unguards, in the live system, the claims whose slot has ended
// since. An ended slot overlaps only slots that started before it ended: no slot that starts after the
// horizon, which is everything still bookable, can clash with an unguarded claim. The Go slot-holder
// rule decides every conflict, past ones included; only the database's second check of it is left to
// the slots that can still change.

// GuardMargin is how long after its slot ends a claim stays in the guard. Any margin keeps the
// argument above; a day keeps the claims of today's meetings (late provider events, clocks that
// disagree by minutes) in the guard.
const GuardMargin = 24 * time.Hour

// GuardSweepBatch is the most claims one SweepGuard call unguards.
const GuardSweepBatch = 5_000

// GuardSweepInterval is how often the server sweeps the guard.
const GuardSweepInterval = time.Minute

// sweepGuardSQL unguards at most $2 guarded claims whose slot ended $1 seconds or more before now,
// the earliest-ended first (calendar_slots_guarded_end_idx). It skips the rows the projection has
// locked, so it never waits on a batch nor deadlocks with one; the next sweep takes them.
const sweepGuardSQL = `UPDATE calendar_slots s SET guarded = false
FROM (SELECT booking, resource_id FROM calendar_slots
      WHERE guarded AND upper(during) < now() - make_interval(secs => $1)
      ORDER BY upper(during) LIMIT $2 FOR UPDATE SKIP LOCKED) e
WHERE s.booking = e.booking AND s.resource_id = e.resource_id`

// SweepGuard takes at most GuardSweepBatch claims whose slot ended more than GuardMargin ago out of
// the double-booking guard, and returns how many it took. Their status, holder flag and every other
// column stay as they are. Called every GuardSweepInterval, until it returns less than a batch.
func (m *ReadModel) SweepGuard(ctx context.Context) (int64, error) {
	tag, err := m.pool.Exec(ctx, sweepGuardSQL, GuardMargin.Seconds(), GuardSweepBatch)
	if err != nil {
		return 0, fmt.Errorf("sweep the double-booking guard: %w", err)
	}
	return tag.RowsAffected(), nil
}

// guardHorizon is the horizon of a rebuild that starts now: claims whose slot ended before it are
// loaded unguarded.
func (m *ReadModel) guardHorizon(ctx context.Context) (time.Time, error) {
	if !m.horizon.IsZero() {
		return m.horizon, nil
	}
	var now time.Time
	if err := m.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read the guard's horizon: %w", err)
	}
	return now.Add(-GuardMargin), nil
}
