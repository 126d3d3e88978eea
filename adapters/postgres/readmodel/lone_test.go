package readmodel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/domain/booking"
	"bookingledger/projections/calendar"
)

// A first run over a log of meetings that are over computes the lone bookings in its fold and leaves
// to the chunks those whose row needs another stream: two that overlap, one rescheduled to another
// host (its row says so only from the new booking's events), one paid (its payment stream), and two
// that overlap after the guard's horizon. A lone booking after the horizon is computed in the fold,
// and its claim is guarded as every claim after the horizon. The calendar is the one the incremental
// runner computes, batch by batch, and the chunks got exactly those six.
func TestRebuildComputesLoneBookingsInTheFold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ds := []delivery{
		one("lone", created("calendly-lone", at(-50, 0), slot("ev-lone", at(9, 0), 30, "host-a"))),
		one("lone-later", created("calendly-lone-later", at(-50, 0), slot("ev-lone-later", at(9, 30), 30, "host-a"))),
		one("first", created("calendly-first", at(-40, 0), slot("ev-first", at(10, 0), 60, "host-b"))),
		one("second", created("calendly-second", at(-39, 0), slot("ev-second", at(10, 30), 60, "host-b"))),
		one("old", created("calendly-old", at(-30, 0), slot("ev-old", at(9, 0), 30, "host-c"))),
		one("new", event("calendly-new", "created", at(-20, 0),
			booking.Scheduled{Slot: slot("ev-new", at(11, 0), 30, "host-d"), Capacity: 1, RescheduledFrom: "calendly-old"})),
		one("paid", event("calendly-paid", "created", at(-10, 0),
			booking.Scheduled{Slot: slot("ev-paid", at(13, 0), 30, "host-e"), Capacity: 1, PaymentRefs: []string{"stripe:ch_9"}})),
		one("payment", event("stripe-pi_9", "succeeded", at(-9, 0),
			booking.PaymentSucceeded{Refs: []string{"stripe:pi_9", "stripe:ch_9"}, Amount: 5000, Currency: "eur"})),
		one("ahead", created("calendly-ahead", at(-5, 0), slot("ev-ahead", at(30, 0), 30, "host-a"))),
		one("ahead-first", created("calendly-ahead-first", at(-4, 0), slot("ev-ahead-first", at(30, 0), 60, "host-f"))),
		one("ahead-second", created("calendly-ahead-second", at(-3, 0), slot("ev-ahead-second", at(30, 30), 60, "host-f"))),
	}
	inc, reb := newEnv(t), newEnv(t)
	for _, d := range ds {
		inc.deliver(t, d)
		inc.catchUp(t)
		reb.deliver(t, d)
	}
	want := snapshotOf(t, inc)
	require.Equal(t, calendar.StatusCanceled, rowOf(t, want, "calendly-old").Status, "the new booking releases the old one")
	require.Equal(t, booking.PaymentIsPaid, rowOf(t, want, "calendly-paid").Payment)
	require.Len(t, want.Open, 2, "each overlap is a conflict")

	reb.waitReadable(t)
	reb.rm = readmodel.New(reb.pool, reb.store, eventcodec.JSON{}, readmodel.Options{IndexFirstUpTo: -1})
	readmodel.SetGuardHorizon(reb.rm, at(24, 0))
	readmodel.SetReplayBatch(reb.rm, 1) // every stream a batch of its own
	require.NoError(t, reb.rm.Rebuild(ctx, nil))
	assert.Equal(t, want, snapshotOf(t, reb))
	assert.EqualValues(t, 6, readmodel.Chunked(reb.rm), "first, second, old, paid, ahead-first and ahead-second")
	var guarded []string
	require.NoError(t, pgxscan(reb, `SELECT booking FROM calendar_slots WHERE guarded ORDER BY booking`, &guarded))
	assert.Equal(t, []string{"calendly-ahead", "calendly-ahead-first", "calendly-ahead-second"}, guarded,
		"the claims that end after the horizon are guarded, lone or not")
}

// On a log where most bookings overlap another, the fold stops computing those that share a quarter
// hour of a resource with a booking folded before them (crowding in lone.go): once more than half the
// bookings with a slot so far did, it leaves them to the chunks instead of computing them for the walk
// to undo. Folded in stream order, one stream a batch: alone computed; pile-1 to pile-3 computed
// (the share is not yet over half), then undone; pile-4 to pile-8 left to the chunks; zlone, on a
// host of its own, computed as lone although the log is crowded by then. The calendar is the one the
// incremental runner computes.
func TestRebuildLeavesACrowdedLogToTheChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ds := []delivery{one("alone", created("calendly-alone", at(-60, 0), slot("ev-alone", at(9, 0), 30, "host-b")))}
	for i, start := range []time.Time{at(9, 0), at(9, 0), at(9, 0), at(9, 15), at(9, 0), at(9, 15), at(9, 0), at(9, 0)} {
		b := booking.ID(fmt.Sprintf("calendly-pile-%d", i+1))
		ds = append(ds, one(string(b), created(b, at(-50+i, 0), slot("ev-"+string(b), start, 30, "host-a"))))
	}
	ds = append(ds, one("zlone", created("calendly-zlone", at(-30, 0), slot("ev-zlone", at(9, 0), 30, "host-c"))))
	inc, reb := newEnv(t), newEnv(t)
	for _, d := range ds {
		inc.deliver(t, d)
		inc.catchUp(t)
		reb.deliver(t, d)
	}
	want := snapshotOf(t, inc)
	require.Len(t, want.Open, 7, "each later booking of the pile is a conflict")

	reb.waitReadable(t)
	reb.rm = readmodel.New(reb.pool, reb.store, eventcodec.JSON{}, readmodel.Options{IndexFirstUpTo: -1})
	readmodel.SetGuardHorizon(reb.rm, at(24, 0))
	readmodel.SetReplayBatch(reb.rm, 1)
	require.NoError(t, reb.rm.Rebuild(ctx, nil))
	assert.Equal(t, want, snapshotOf(t, reb))
	assert.EqualValues(t, 8, readmodel.Chunked(reb.rm), "the pile")
	assert.EqualValues(t, 3, readmodel.Undone(reb.rm), "pile-1 to pile-3: computed in the fold, then undone")
}

func pgxscan(e *env, sql string, out *[]string) error {
	rows, err := e.pool.Query(context.Background(), sql)
	if err != nil {
		return err
	}
	*out, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return err
}
