package readmodel

import (
	"context"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/booking"
	"bookingledger/projections/calendar"
)

// Most bookings of a calendar in use for years overlap no other claim: conflicts are exceptions. Such
// a lone booking's row depends on its own events alone, so a rebuild computes it in the fold, where
// its events are decoded and folded anyway, and the chunks read back (a second sort of the whole log
// with its event bodies, a join with every key, and a second decode) only the bookings that need
// them: those connected to another by overlaps, and those whose row depends on other streams.
//
// The fold cannot know yet which bookings overlap: the resource groups and every slot are known only
// at its end. So it computes every booking that may be lone and stages it (computeLone), and then
// sortOutLone walks the booking keys in (group, start) order, as the chunks are cut, and undoes what
// the fold staged of the bookings that turned out not to be lone. A booking may be lone when
//
//   - no conflict or late-event item exists (a rebuild whose chunks must sync stored items computes
//     every booking in them);
//   - it has no payment references (its payment streams are known at the fold's end) and no series
//     (its series' cancels are).
//
// It is lone when besides no booking was rescheduled from it (the chunks pass those) and its key
// connects to no other in the walk. A booking computed apart from everything gets the row Recompute
// gives it among its connected claims, which are none (calendar.Component).
//
// The staging claims table has the guard while it loads (planIndexes), and two overlapping bookings
// computed apart could both hold. So the fold loads there only the claims that load unguarded (their
// slot ended before the guard's horizon, guard.go); it stages the others in calendar_lone_slots, which
// has no guard, and they move to the claims table, through the guard, once the walk has undone those
// of the bookings that overlap.

// mayBeLone says whether the fold computes a booking folded to st as a lone one.
func mayBeLone(st booking.State) bool {
	return len(st.PaymentRefs) == 0 && st.Series == ""
}

// crowding tells the fold, on a log where most bookings overlap another, which bookings not to compute
// as lone: those that would only be undone by the walk. It remembers in a fixed number of bits which
// quarter hours of which resources the fold has met a slot in; a booking whose slot shares one with a
// booking folded before it most likely overlaps that one. Once more than half the bookings with a
// slot folded so far were such, the fold computes those no more and leaves them to the chunks, where
// the walk would have sent them after undoing them (on the 1,000,000-event overlapping benchmark log,
// 96 % in conflict: ADR 0029's amendment). On a calendar whose conflicts are exceptions the share stays
// near the bits' false matches, a few in a hundred, and the fold computes every candidate as before;
// once a sample of bookings (crowdSample) says so, the crowding stops looking, as its look at every
// slot cost the 5,000,000-event past90 log's fold about a tenth. Nothing here decides a row: a booking not caught is undone by the walk, one caught wrongly is computed
// in the chunks, which give a lone booking the same row.
type crowding struct {
	bits          []uint64
	seed          maphash.Seed
	slots, shared int64 // bookings with a slot looked at, and those that met a marked quarter hour
	off           bool  // the sample found the log uncrowded
}

// crowdQuarter is the crowding's grain; crowdLongest the longest slot it looks at (a longer one is
// left to the walk alone, as its quarter hours would be many). After crowdSample bookings with a
// slot, fewer than one in eight of which met a marked quarter hour, it stops: the fold's order is the
// streams' ids', which say nothing of the slots, so the sample is one of the whole log. (On the
// overlapping benchmark logs, whatever their size, 85 % of the sample has met one.)
const (
	crowdQuarter = 15 * time.Minute
	crowdLongest = 24 * time.Hour
	crowdSample  = 1 << 16
)

// newCrowding sizes the bits for a replay of events: 32 a booking event, from 2^16 up to 2^27 (16 MB).
func newCrowding(events int64) *crowding {
	n := uint64(1) << 16
	for n < uint64(max(events, 0))*32 && n < 1<<27 {
		n <<= 1
	}
	return &crowding{bits: make([]uint64, n/64), seed: maphash.MakeSeed()}
}

// skip marks the quarter hours of the slot [start, end) on resources and says whether the fold leaves
// the booking to the chunks: it met a marked one, and the log is crowded.
func (c *crowding) skip(resources []string, start, end time.Time) bool {
	if c.off || !end.After(start) || end.Sub(start) > crowdLongest {
		return false
	}
	met := false
	mask := uint64(len(c.bits))*64 - 1
	for _, r := range resources {
		h := maphash.String(c.seed, r)
		for q := start.Truncate(crowdQuarter); q.Before(end); q = q.Add(crowdQuarter) {
			x := h ^ uint64(q.Unix()/int64(crowdQuarter/time.Second))*0x9e3779b97f4a7c15
			x ^= x >> 29
			x *= 0xbf58476d1ce4e5b9
			x ^= x >> 32
			i, j := x&mask, (x>>32|x<<32)&mask
			w1, b1, w2, b2 := i/64, uint64(1)<<(i%64), j/64, uint64(1)<<(j%64)
			if c.bits[w1]&b1 != 0 && c.bits[w2]&b2 != 0 {
				met = true
			}
			c.bits[w1] |= b1
			c.bits[w2] |= b2
		}
	}
	c.slots++
	if met {
		c.shared++
	}
	if c.slots == crowdSample && 8*c.shared < c.slots {
		c.off, c.bits = true, nil
	}
	return met && 2*c.shared > c.slots
}

// noPayments are what a lone booking is linked to: no payment stream.
var noPayments = paymentsOf{index: calendar.NewPaymentIndex(nil)}

// computeLone computes the fold's candidates as lone bookings, in one Recompute for the batch, and
// queues their rows, claims and items for loading. A candidate's row there is the one it gets alone
// when it turns out lone: what else of the batch the computation sees only changes the rows of the
// others it overlaps (conflicts) or was rescheduled from, and those are not lone. Its series is what
// could reach across batches, and a booking in one is no candidate.
func (m *ReadModel) computeLone(ctx context.Context, s *staging, ld *loader, candidates []*replayed) error {
	inputs := make([]calendar.BookingInput, len(candidates))
	for i, st := range candidates {
		inputs[i] = noPayments.input(st)
	}
	return m.stageChanges(ctx, s, ld, calendar.Recompute(calendar.Component{Bookings: inputs, Canonical: m.bufLinks.Canonical}), true)
}

// overlapWalk follows booking keys in (group, start) order. Claims of a group are read by start: one
// that starts at or after the end of every claim before it overlaps none of them, nor does any claim
// after it.
type overlapWalk struct {
	group  *int32
	maxEnd time.Time
}

// next says whether k, the key after those walked, is connected to the one before it by overlaps in
// its group, and walks it.
func (w *overlapWalk) next(k chunkKey) bool {
	connected := k.group != nil && w.group != nil && *k.group == *w.group && k.start.Before(w.maxEnd)
	switch {
	case k.group == nil:
		w.group = nil
	case w.group == nil || *k.group != *w.group:
		w.group, w.maxEnd = k.group, *k.end
	case k.end.After(w.maxEnd):
		w.maxEnd = *k.end
	}
	return connected
}

// keysSQL reads every booking's key in the order chunks are cut in (chunkSQL's), with its group and
// the bookings rescheduled from it.
const keysSQL = `SELECT k.stream, k.booking, k.computed, g.grp, k.lower, k.upper, r.by
FROM %[1]s k
LEFT JOIN %[2]s g ON g.resource = k.resource
LEFT JOIN (SELECT rescheduled_from, array_agg(booking) AS by FROM %[1]s WHERE rescheduled_from <> '' GROUP BY 1) r
    ON r.rescheduled_from = k.booking
ORDER BY g.grp, k.lower, k.stream COLLATE "C"`

// undoSQL deletes what the fold staged of the bookings in calendar_undo (%[4]s): their rows (%[1]s),
// claims (%[2]s and %[5]s) and items (%[3]s). Each is a join: an item's two sides as one condition
// (booking IN (…) OR other_booking IN (…)) scanned the whole undo list for every item once the list
// outgrew work_mem, minutes for a log of conflicts.
const undoSQL = `ANALYZE %[4]s;
DELETE FROM %[1]s t USING %[4]s u WHERE t.booking = u.booking;
DELETE FROM %[2]s t USING %[4]s u WHERE t.booking = u.booking;
DELETE FROM %[5]s t USING %[4]s u WHERE t.booking = u.booking;
DELETE FROM %[3]s t USING %[4]s u WHERE t.booking = u.booking;
DELETE FROM %[3]s t USING %[4]s u WHERE t.other_booking = u.booking`

// loneSlotsSQL moves the guarded claims of the lone bookings on resources $1 mod $2 into the claims
// table, through its guard: the guard's parts are by resource id (planIndexes), so that the
// connections that load take disjoint parts.
const loneSlotsSQL = `INSERT INTO %[1]s SELECT * FROM %[2]s WHERE resource_id %% $2 = $1`

// keyed is one booking's key as the walk reads it.
type keyed struct {
	stream, booking string
	computed        bool
	key             chunkKey
}

// sortOutLone is step 3 (bulk.go): it walks the booking keys, writes the keys of the bookings that are
// not lone into calendar_rest for the chunks, deletes what the fold staged of those among them it
// computed, and moves the lone bookings' guarded claims into the claims table. It returns how many
// bookings the chunks have left to compute, and how many of those the fold had computed.
func (m *ReadModel) sortOutLone(ctx context.Context, s *staging) (rest, undone int64, err error) {
	ld := m.startLoad(ctx)
	var (
		walk       overlapWalk
		run, chunk []keyed
		undo       []string
		restTable  = s.table("calendar_rest")
		undoTable  = s.table("calendar_undo")
		restColumn = []string{"stream", "grp", "lower", "upper", "by"}
	)
	flushRest := func() {
		batch, ub := chunk, undo
		chunk, undo = make([]keyed, 0, keyBatch), nil
		ld.add(func(ctx context.Context, c pgx.Tx) error {
			_, err := copyRows(ctx, c, restTable, restColumn, len(batch), func(i int, w *copyWriter) error {
				k := batch[i]
				w.text(k.stream)
				if k.key.group == nil {
					w.null()
				} else {
					w.int4(int(*k.key.group))
				}
				w.nullTimestamptz(timeOf(k.key.start))
				w.nullTimestamptz(timeOf(k.key.end))
				w.texts(k.key.supersededBy)
				return nil
			})
			if err == nil {
				_, err = copyRows(ctx, c, undoTable, []string{"booking"}, len(ub), func(i int, w *copyWriter) error { w.text(ub[i]); return nil })
			}
			return err
		})
	}
	endRun := func() {
		if len(run) == 1 && run[0].computed && len(run[0].key.supersededBy) == 0 {
			run = run[:0]
			return
		}
		for _, k := range run {
			chunk = append(chunk, k)
			if k.computed {
				undo = append(undo, k.booking)
				undone++
			}
		}
		rest += int64(len(run))
		run = run[:0]
		if len(chunk) >= keyBatch {
			flushRest()
		}
	}
	err = rebuildTx(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL default_statistics_target = 10; ANALYZE "+s.table("calendar_keys")+", "+s.table("calendar_groups")); err != nil {
			return fmt.Errorf("analyze the booking keys: %w", err)
		}
		rows, err := tx.Query(ctx, fmt.Sprintf(keysSQL, s.table("calendar_keys"), s.table("calendar_groups")))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k keyed
			if err := rows.Scan(&k.stream, &k.booking, &k.computed, &k.key.group, &k.key.start, &k.key.end, &k.key.supersededBy); err != nil {
				return err
			}
			if !walk.next(k.key) {
				endRun()
			}
			run = append(run, k)
		}
		return rows.Err()
	})
	if err == nil {
		endRun()
		if len(chunk) > 0 {
			flushRest()
		}
	}
	if err != nil {
		ld.abort()
		return 0, 0, fmt.Errorf("read the booking keys: %w", err)
	}
	if err := ld.wait(); err != nil {
		return 0, 0, fmt.Errorf("write the chunks' bookings: %w", err)
	}
	slots, loneSlots := s.table("calendar_slots"), s.table("calendar_lone_slots")
	if undone > 0 {
		err := rebuildTx(ctx, m.pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, fmt.Sprintf(undoSQL, s.table("calendar_bookings"), slots, s.table("calendar_item_opens"), undoTable, loneSlots))
			return err
		})
		if err != nil {
			return 0, 0, fmt.Errorf("undo the bookings that are not lone: %w", err)
		}
	}
	ld = m.startLoad(ctx)
	for part := range rebuildLoadConns {
		ld.add(func(ctx context.Context, c pgx.Tx) error {
			_, err := c.Exec(ctx, fmt.Sprintf(loneSlotsSQL, slots, loneSlots), part, rebuildLoadConns)
			return err
		})
	}
	if err := ld.wait(); err != nil {
		return 0, 0, fmt.Errorf("guard the claims of lone bookings: %w", guardErr(err))
	}
	return rest, undone, nil
}
