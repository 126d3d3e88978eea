package readmodel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

func TestConflictHolderRuleAndAutoClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const host = "https://api.calendly.com/users/HOST1"
	first, second := created("calendly-aaa", at(-48, 0), slot("meeting-1", at(10, 0), 30, host)),
		created("calendly-bbb", at(-47, 0), slot("meeting-2", at(10, 15), 30, host))
	// The later-scheduled booking arrives first: the rule must not depend on arrival.
	e.deliver(t, one("d-2", second))
	e.catchUp(t)
	assert.Equal(t, calendar.StatusActive, e.booking(t, "calendly-bbb").Status)
	e.deliver(t, one("d-1", first))
	e.catchUp(t)

	a, b := e.booking(t, "calendly-aaa"), e.booking(t, "calendly-bbb")
	assert.Equal(t, calendar.StatusActive, a.Status)
	assert.True(t, a.Holder)
	assert.Equal(t, calendar.StatusConflict, b.Status)
	assert.Equal(t, []string{"calendly-aaa"}, e.holders(t))
	items := e.openItems(t)
	require.Len(t, items, 1)
	assert.Equal(t, calendar.ItemConflict, items[0].Kind)
	assert.Equal(t, "calendly-bbb calendly-aaa", items[0].Subject)
	assert.Contains(t, items[0].Reason, "earlier provider scheduled-at")

	e.deliver(t, one("d-3", canceled("calendly-aaa", at(-1, 0), "host sick")))
	e.catchUp(t)
	assert.Equal(t, calendar.StatusCanceled, e.booking(t, "calendly-aaa").Status)
	b = e.booking(t, "calendly-bbb")
	assert.Equal(t, calendar.StatusActive, b.Status)
	assert.True(t, b.Holder)
	assert.Empty(t, e.openItems(t))
	all, err := e.rm.Items(context.Background(), "calendly-bbb")
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, calendar.ClosedByAuto, all[0].ClosedBy)
	// The cancel's reason is a person's free text, kept apart from the events: the note names none.
	assert.Contains(t, all[0].Note, "holder calendly-aaa is canceled now; calendly-bbb holds the slot")
}

func TestExclusionConstraintRefusesOverlappingHolders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `INSERT INTO calendar_resources (resource) VALUES ('host-1'), ('host-2')`)
	require.NoError(t, err)
	insert := `INSERT INTO calendar_slots (booking, resource_id, resource, meeting, during, priority_at, holder)
VALUES ($1, (SELECT id FROM calendar_resources WHERE resource = $2), $2, $3, tstzrange($4, $5), $4, $6)`
	_, err = e.pool.Exec(ctx, insert, "x-holder", "host-1", "meeting-x", at(10, 0), at(11, 0), true)
	require.NoError(t, err)

	cases := []struct {
		name                  string
		booking, res, meeting string
		start, end            time.Time
		holder                bool
		refused               bool
	}{
		{"overlapping holder of another meeting", "y", "host-1", "meeting-y", at(10, 30), at(11, 30), true, true},
		{"holder inside the other's range", "y2", "host-1", "meeting-y", at(10, 10), at(10, 20), true, true},
		{"holder of a meeting whose text differs by a trailing space", "y3", "host-1", "meeting-x ", at(10, 0), at(11, 0), true, true},
		{"holder of a ten-day meeting around it", "y4", "host-1", "retreat", at(-5*24, 0), at(5*24, 0), true, true},
		{"invitee of the same meeting (group event)", "x-second-invitee", "host-1", "meeting-x", at(10, 0), at(11, 0), true, false},
		{"overlapping claim that does not hold", "z", "host-1", "meeting-z", at(10, 30), at(11, 30), false, false},
		{"back-to-back holder", "w", "host-1", "meeting-w", at(11, 0), at(11, 30), true, false},
		{"overlapping holder on another resource", "v", "host-2", "meeting-v", at(10, 0), at(11, 0), true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.pool.Exec(ctx, insert, c.booking, c.res, c.meeting, c.start, c.end, c.holder)
			if !c.refused {
				assert.NoError(t, err)
				return
			}
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			assert.Equal(t, "23P01", pgErr.Code, "exclusion_violation")
			assert.Regexp(t, `^calendar_slots_no_double_booking_[0-7]$`, pgErr.ConstraintName)
		})
	}

	// The guard is eight exclusion constraints, one per resource_id % 8 (migration 0200): each refuses
	// a second holder of another meeting on the resources of its part.
	t.Run("every part of the guard", func(t *testing.T) {
		for i := range 16 {
			res := fmt.Sprintf("host-part-%d", i)
			var id int
			require.NoError(t, e.pool.QueryRow(ctx, `INSERT INTO calendar_resources (resource) VALUES ($1) RETURNING id`, res).Scan(&id))
			_, err := e.pool.Exec(ctx, insert, "p-holder-"+res, res, "meeting-p", at(10, 0), at(11, 0), true)
			require.NoError(t, err, "holders on different resources never clash")
			_, err = e.pool.Exec(ctx, insert, "p-other-"+res, res, "meeting-q", at(10, 30), at(11, 30), true)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, res)
			assert.Equal(t, fmt.Sprintf("calendar_slots_no_double_booking_%d", id%8), pgErr.ConstraintName)
		}
	})

	t.Run("turning a claim into a second holder", func(t *testing.T) {
		_, err := e.pool.Exec(ctx, `UPDATE calendar_slots SET holder = true WHERE booking = 'z'`)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		assert.Equal(t, "23P01", pgErr.Code)
	})
}

func TestGroupMeetingInviteesShareTheSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const host = "host-group"
	group := slot("webinar", at(14, 0), 60, host)
	for i, id := range []string{"calendly-g1", "calendly-g2", "calendly-g3"} {
		ev := event(booking.ID(id), "created", at(-72+i, 0), booking.Scheduled{Slot: group, Capacity: 10})
		e.deliver(t, one("g-"+id, ev))
	}
	intruder := created("calendly-late", at(-10, 0), slot("one-on-one", at(14, 30), 30, host))
	e.deliver(t, one("g-late", intruder))
	e.catchUp(t)

	for _, id := range []booking.ID{"calendly-g1", "calendly-g2", "calendly-g3"} {
		b := e.booking(t, id)
		assert.Equal(t, calendar.StatusActive, b.Status, id)
		assert.True(t, b.Holder, id)
	}
	assert.Equal(t, calendar.StatusConflict, e.booking(t, "calendly-late").Status)
	assert.Equal(t, []string{
		"conflict: calendly-late calendly-g1", "conflict: calendly-late calendly-g2", "conflict: calendly-late calendly-g3",
	}, itemSubjects(e.openItems(t)))
}

func TestRequestedBookingDoesNotHoldItsSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const host = "host-r"
	req := event("calcom-req", "requested", at(-50, 0), booking.Requested{Slot: slot("calcom-series-1", at(9, 0), 60, host), Capacity: 1})
	active := created("calendly-act", at(-40, 0), slot("meeting-act", at(9, 30), 30, host))
	e.deliver(t, one("r-1", req))
	e.deliver(t, one("r-2", active))
	e.catchUp(t)
	assert.Equal(t, calendar.StatusRequested, e.booking(t, "calcom-req").Status)
	assert.False(t, e.booking(t, "calcom-req").Holder)
	assert.True(t, e.booking(t, "calendly-act").Holder)
	assert.Empty(t, e.openItems(t))

	// Confirmed, the request's own time is its scheduled-at: it was first, so it takes the slot.
	confirm := event("calcom-req", "confirmed", at(-30, 0), booking.Scheduled{Slot: slot("calcom-series-1", at(9, 0), 60, host), Capacity: 1})
	e.deliver(t, one("r-3", confirm))
	e.catchUp(t)
	assert.Equal(t, calendar.StatusActive, e.booking(t, "calcom-req").Status)
	assert.Equal(t, calendar.StatusConflict, e.booking(t, "calendly-act").Status)
	assert.Equal(t, []string{"conflict: calendly-act calcom-req"}, itemSubjects(e.openItems(t)))
}

func TestCalendlyRescheduleResolvesInAnyOrder(t *testing.T) {
	t.Parallel()
	const host = "host-cal"
	oldCreate := created("calendly-old", at(-30, 0), slot("ev-old", at(10, 0), 60, host))
	oldCancel := event("calendly-old", "canceled", at(-2, 0), booking.Canceled{Reason: "rescheduled", CanceledBy: "invitee", RescheduledTo: "calendly-new"})
	newCreate := event("calendly-new", "created", at(-2, 0).Add(time.Microsecond),
		booking.Scheduled{Slot: slot("ev-new", at(10, 30), 60, host), Capacity: 1, RescheduledFrom: "calendly-old"})
	orders := map[string][]booking.Event{
		"cancel first": {oldCreate, oldCancel, newCreate},
		"create first": {oldCreate, newCreate, oldCancel},
		"new first":    {newCreate, oldCreate, oldCancel},
		"old last":     {newCreate, oldCancel, oldCreate},
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // on a database of its own
			e := newEnv(t)
			for i, ev := range order {
				e.deliver(t, one(fmt.Sprintf("cal-%d", i), ev))
				e.catchUp(t)
				// The old and the new slot overlap: at no step may both hold, nor a conflict open.
				assert.Empty(t, e.openItems(t), "after %s", ev.ProviderRef)
				assert.LessOrEqual(t, len(e.holders(t)), 1, "after %s", ev.ProviderRef)
			}
			old, nw := e.booking(t, "calendly-old"), e.booking(t, "calendly-new")
			assert.Equal(t, calendar.StatusCanceled, old.Status)
			assert.Equal(t, booking.ID("calendly-new"), old.RescheduledTo)
			assert.Empty(t, old.CancelReason, "a reason the provider sent is free text: never in the events or the row")
			assert.Equal(t, calendar.StatusActive, nw.Status)
			assert.True(t, nw.Holder)
			assert.Equal(t, booking.ID("calendly-old"), nw.RescheduledFrom)
			all, err := e.rm.Items(context.Background(), "calendly-old")
			require.NoError(t, err)
			assert.Empty(t, all, "no transient conflict either")
		})
	}

	t.Run("old booking superseded before its cancel arrives", func(t *testing.T) {
		t.Parallel() // on a database of its own
		e := newEnv(t)
		e.deliver(t, one("s-1", oldCreate))
		e.deliver(t, one("s-2", newCreate))
		e.catchUp(t)
		old := e.booking(t, "calendly-old")
		assert.Equal(t, calendar.StatusCanceled, old.Status)
		assert.Equal(t, booking.StatusActive, old.BookingStatus, "its own events still say active")
		assert.True(t, old.CancelImplied)
		assert.Equal(t, booking.ID("calendly-new"), old.RescheduledTo)
	})
}

func TestCalcomRescheduleWithImpliedCancel(t *testing.T) {
	t.Parallel()
	const host = "host-calcom"
	oldCreate := created("calcom-uid-old", at(-20, 0), slot("ical-1", at(15, 0), 30, host))
	// One BOOKING_RESCHEDULED delivery: the new booking, and the cancel the ledger infers for the old.
	resched := delivery{ID: "calcom-resched", Provider: "calcom", Events: []booking.Event{
		event("calcom-uid-new", "created", at(-5, 0), booking.Scheduled{Slot: slot("ical-1", at(15, 15), 30, host), RescheduledFrom: "calcom-uid-old"}),
		event("calcom-uid-old", "implied-cancel", at(-5, 0), booking.Canceled{CanceledBy: "provider", RescheduledTo: "calcom-uid-new", Implied: true}),
	}}
	for name, first := range map[string]bool{"create first": true, "reschedule first": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // on a database of its own
			e := newEnv(t)
			if first {
				e.deliver(t, one("c-1", oldCreate))
				e.catchUp(t)
			}
			e.deliver(t, resched)
			e.catchUp(t)
			if !first {
				e.deliver(t, one("c-1", oldCreate))
				e.catchUp(t)
			}
			old, nw := e.booking(t, "calcom-uid-old"), e.booking(t, "calcom-uid-new")
			assert.Equal(t, calendar.StatusCanceled, old.Status)
			assert.True(t, old.CancelImplied)
			assert.Equal(t, booking.ID("calcom-uid-new"), old.RescheduledTo)
			assert.True(t, old.HasSlot(), "the old slot stays known")
			assert.Equal(t, calendar.StatusActive, nw.Status)
			assert.Equal(t, booking.ID("calcom-uid-old"), nw.RescheduledFrom)
			assert.Equal(t, []string{"calcom-uid-new"}, e.holders(t))
			assert.Empty(t, e.openItems(t))
		})
	}
}

func TestPaymentStatusFromLinkedPaymentStreams(t *testing.T) {
	t.Parallel()
	const host = "host-pay"
	bk := event("calendly-paid", "created", at(-10, 0), booking.Scheduled{Slot: slot("ev-pay", at(16, 0), 30, host), PaymentRefs: []string{"stripe:ch_1"}})
	succeeded := event("stripe-pi_1", "succeeded", at(-9, 0), booking.PaymentSucceeded{Refs: []string{"stripe:pi_1", "stripe:ch_1"}, Amount: 5000, Currency: "eur"})
	refunded := event("stripe-pi_1", "refunded", at(-3, 0), booking.PaymentRefunded{Refs: []string{"stripe:ch_1", "stripe:pi_1"}, Amount: 5000, Currency: "eur"})
	orders := map[string][]booking.Event{
		"in order":                {bk, succeeded, refunded},
		"refund first":            {refunded, bk, succeeded},
		"refund before success":   {bk, refunded, succeeded},
		"payments before booking": {succeeded, refunded, bk},
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // on a database of its own
			e := newEnv(t)
			refundSeen := false
			for i, ev := range order {
				e.deliver(t, one(fmt.Sprintf("p-%d", i), ev))
				e.catchUp(t)
				refundSeen = refundSeen || ev.ID == refunded.ID
				b, err := e.rm.Booking(context.Background(), "calendly-paid")
				if errors.Is(err, projections.ErrNotFound) {
					continue
				}
				require.NoError(t, err)
				if refundSeen {
					assert.NotEqual(t, booking.PaymentIsPaid, b.Payment, "a refund that arrived must never leave the booking paid")
				}
			}
			b := e.booking(t, "calendly-paid")
			assert.Equal(t, booking.PaymentIsRefunded, b.Payment)
			assert.Equal(t, []booking.ID{"stripe-pi_1"}, b.PaymentStreams)
			assert.Equal(t, []string{"stripe:ch_1", "stripe:pi_1"}, b.PaymentRefs)
			_, err := e.rm.Booking(context.Background(), "stripe-pi_1")
			assert.ErrorIs(t, err, projections.ErrNotFound, "a payment stream is not a calendar booking")
		})
	}

	t.Run("linked through another payment stream", func(t *testing.T) {
		t.Parallel() // on a database of its own
		e := newEnv(t)
		// The failure names only the intent; the success names intent and charge. The booking knows
		// only the charge, so the failure links through the success's stream, which arrives last.
		failed := event("stripe-pi_2", "failed", at(-9, 0), booking.PaymentFailed{Refs: []string{"stripe:pi_2"}, Reason: "card declined"})
		ok := event("stripe-ch_2", "succeeded", at(-8, 0), booking.PaymentSucceeded{Refs: []string{"stripe:pi_2", "stripe:ch_2"}, Amount: 100, Currency: "usd"})
		bk2 := event("calendly-paid2", "created", at(-10, 0), booking.Scheduled{Slot: slot("ev-pay2", at(17, 0), 30, host), PaymentRefs: []string{"stripe:ch_2"}})
		for i, ev := range []booking.Event{failed, bk2, ok} {
			e.deliver(t, one(fmt.Sprintf("q-%d", i), ev))
			e.catchUp(t)
		}
		b := e.booking(t, "calendly-paid2")
		assert.Equal(t, []booking.ID{"stripe-ch_2", "stripe-pi_2"}, b.PaymentStreams)
		assert.Equal(t, booking.PaymentIsPaid, b.Payment)
	})
}

// A stream that held only payment events is a payment stream until a booking event joins it: then its
// payment rows go, and another booking sharing its reference does not take it for a payment.
func TestPaymentStreamThatBecomesABookingIsNoLongerAPayment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.deliver(t, one("r-0", event("calendly-late", "paid", at(-9, 0), booking.PaymentSucceeded{Refs: []string{"stripe:ch_7"}, Amount: 100, Currency: "eur"})))
	e.catchUp(t)
	require.Equal(t, 1, e.count(t, `payment_streams WHERE stream = 'calendly-late'`))
	e.deliver(t, one("r-1", event("calendly-late", "created", at(-10, 0), booking.Scheduled{Slot: slot("ev-late", at(18, 0), 30, "host-late")})))
	e.catchUp(t)
	assert.Zero(t, e.count(t, `payment_streams WHERE stream = 'calendly-late'`))
	assert.Zero(t, e.count(t, `payment_stream_refs WHERE stream = 'calendly-late'`))
	e.deliver(t, one("r-2", event("calendly-other", "created", at(-10, 0), booking.Scheduled{Slot: slot("ev-other", at(19, 0), 30, "host-late"),
		PaymentRefs: []string{"stripe:ch_7"}})))
	e.catchUp(t)
	assert.Empty(t, e.booking(t, "calendly-other").PaymentStreams)
}

func TestOperatorResolutionIsNotReopened(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const host = "host-op"
	e.deliver(t, one("o-1", created("calendly-op1", at(-5, 0), slot("m1", at(8, 0), 60, host))))
	e.deliver(t, one("o-2", created("calendly-op2", at(-4, 0), slot("m2", at(8, 30), 60, host))))
	e.catchUp(t)
	items := e.openItems(t)
	require.Len(t, items, 1)
	resolved, err := e.rm.Resolve(context.Background(), items[0].ID, "  called the invitee; moving them by hand  ", "tester")
	require.NoError(t, err)
	assert.Equal(t, calendar.ClosedByOperator, resolved.ClosedBy)
	assert.Equal(t, "called the invitee; moving them by hand", resolved.Note)
	assert.Equal(t, "tester", resolved.ResolvedBy, "who resolved it is recorded")

	e.deliver(t, one("o-3", event("calendly-op2", "no-show", at(-1, 0), booking.NoShowMarked{})))
	e.catchUp(t)
	assert.Equal(t, calendar.StatusConflict, e.booking(t, "calendly-op2").Status, "still a conflict at the provider")
	assert.Empty(t, e.openItems(t), "the operator's decision stands")

	_, err = e.rm.Resolve(context.Background(), items[0].ID, "again", "tester")
	assert.ErrorIs(t, err, projections.ErrItemClosed)
	_, err = e.rm.Resolve(context.Background(), 999999, "nope", "tester")
	assert.ErrorIs(t, err, projections.ErrNotFound)
	_, err = e.rm.Resolve(context.Background(), items[0].ID, "   ", "tester")
	assert.ErrorIs(t, err, projections.ErrInvalidQuery)
	_, err = e.rm.Resolve(context.Background(), items[0].ID, "a note", " ")
	assert.ErrorIs(t, err, projections.ErrInvalidQuery)
	// What a text column refuses is a bad request, not a failing statement.
	_, err = e.rm.Resolve(context.Background(), items[0].ID, "a\x00note", "tester")
	assert.ErrorIs(t, err, projections.ErrInvalidQuery)
	_, err = e.rm.Resolve(context.Background(), items[0].ID, "a note", "test\x00er")
	assert.ErrorIs(t, err, projections.ErrInvalidQuery)
}

func TestQuarantinedDeliveryIsQueued(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.quarantine(t, "calendly", "calendly-broken-1", "no host")
	items := e.openItems(t)
	require.Len(t, items, 1)
	assert.Equal(t, calendar.ItemQuarantined, items[0].Kind)
	assert.NotZero(t, items[0].ReceiptID)
	assert.Contains(t, items[0].Reason, `calendly delivery "calendly-broken-1" quarantined`)
	assert.Len(t, e.openItems(t), 1, "listing twice opens nothing twice")

	// The gauge counts a quarantined receipt before its item is opened as well as after, and both kinds
	// together.
	e.quarantine(t, "calendly", "calendly-broken-2", "no host")
	counts, err := e.rm.OpenItemCounts(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[calendar.ItemKind]int64{calendar.ItemQuarantined: 2, calendar.ItemConflict: 0, calendar.ItemLateEvent: 0,
		calendar.ItemStep: 0, calendar.ItemSync: 0}, counts)

	_, err = e.rm.Resolve(context.Background(), items[0].ID, "payload replayed by hand after the provider fixed it", "tester")
	require.NoError(t, err)
	e.catchUp(t)
	open := e.openItems(t)
	require.Len(t, open, 1)
	assert.Contains(t, open[0].Reason, "calendly-broken-2")
}

// TestCalendarPagesCoverTheWindowOnce follows next cursors through a window of bookings sharing
// starts, resources and multi-resource slots, plus one longer than a week: every page size gives the
// one-page answer, in order, each entry once, and only the last page says it is the last.
func TestCalendarPagesCoverTheWindowOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := 0
	for h := 8; h < 12; h++ {
		for _, host := range []string{"host-b", "host-a", "host-c"} {
			n++
			id := booking.ID(fmt.Sprintf("calendly-p%02d", n))
			res := []string{host}
			if n%4 == 0 {
				res = append(res, "host-z")
			}
			e.deliver(t, one(fmt.Sprintf("p-%d", n), created(id, at(-5, n), slot("mp"+fmt.Sprint(n), at(h, 0), 30, res...))))
		}
	}
	e.deliver(t, one("p-long", created("calendly-long", at(-5, 0), slot("mlong", at(-10*24, 0), 11*24*60, "host-a"))))
	e.catchUp(t)
	ctx := context.Background()
	q := calendar.CalendarQuery{From: at(0, 0), To: at(24, 0)}
	whole, err := e.rm.Calendar(ctx, calendar.CalendarQuery{From: q.From, To: q.To, Limit: calendar.MaxCalendarPage})
	require.NoError(t, err)
	require.False(t, whole.More)
	require.Len(t, whole.Entries, 12+3+1, "12 bookings, 3 on a second resource, the long one")
	for _, size := range []int{1, 2, 5, 15, 16, 17} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			var got []calendar.CalendarEntry
			q := q
			q.Limit = size
			for pages := 0; ; pages++ {
				require.Less(t, pages, 20, "pagination ends")
				page, err := e.rm.Calendar(ctx, q)
				require.NoError(t, err)
				require.LessOrEqual(t, len(page.Entries), size)
				got = append(got, page.Entries...)
				if !page.More {
					assert.Nil(t, page.Next())
					break
				}
				require.Len(t, page.Entries, size, "only the last page is short")
				next := page.Next()
				require.NotNil(t, next)
				parsed, err := calendar.ParseCalendarCursor(next.String())
				require.NoError(t, err, "the cursor survives its string form")
				q.After = &parsed
			}
			assert.Equal(t, whole.Entries, got)
		})
	}
	_, err = calendar.ParseCalendarCursor("bm90IGEgY3Vyc29y")
	assert.ErrorIs(t, err, projections.ErrInvalidQuery)
}

func TestCalendarQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.deliver(t, one("k-1", created("calendly-k1", at(-5, 0), slot("mk1", at(9, 0), 30, "host-a", "host-b"))))
	e.deliver(t, one("k-2", created("calendly-k2", at(-5, 0), slot("mk2", at(11, 0), 30, "host-b"))))
	e.deliver(t, one("k-3", created("calendly-k3", at(-5, 0), slot("mk3", at(23, 0), 30, "host-a"))))
	e.catchUp(t)
	ctx := context.Background()

	page, err := e.rm.Calendar(ctx, calendar.CalendarQuery{From: at(8, 0), To: at(12, 0)})
	require.NoError(t, err)
	assert.False(t, page.More)
	got := page.Entries
	var keys []string
	for _, c := range got {
		keys = append(keys, string(c.Booking)+"@"+c.Resource)
	}
	assert.Equal(t, []string{"calendly-k1@host-a", "calendly-k1@host-b", "calendly-k2@host-b"}, keys)

	page, err = e.rm.Calendar(ctx, calendar.CalendarQuery{From: at(8, 0), To: at(24, 0), Resource: "host-a"})
	require.NoError(t, err)
	got = page.Entries
	require.Len(t, got, 2)
	assert.Equal(t, booking.ID("calendly-k3"), got[1].Booking)
	assert.Equal(t, at(23, 0), got[1].Start)
	assert.Equal(t, calendar.StatusActive, got[1].Status)

	page, err = e.rm.Calendar(ctx, calendar.CalendarQuery{From: at(9, 30), To: at(11, 0)})
	require.NoError(t, err)
	assert.Empty(t, page.Entries, "ranges are half-open")

	_, err = e.rm.Calendar(ctx, calendar.CalendarQuery{From: at(12, 0), To: at(8, 0)})
	assert.ErrorIs(t, err, projections.ErrInvalidQuery)
}

// TestLongClaimsConflictWhateverTheirLength: a claim longer than the seven days the claims' start
// index looks back (migration 0185) is found through the partial GiST, whichever side arrives first
// and whichever side is recomputed; a rebuild gives the same calendar.
func TestLongClaimsConflictWhateverTheirLength(t *testing.T) {
	t.Parallel()
	const host = "host-long"
	retreat := created("calendly-retreat", at(-100, 0), slot("retreat", at(0, 0), 10*24*60, host)) // ten days
	late := created("calendly-late", at(-50, 0), slot("late-call", at(9*24+10, 0), 30, host))      // on its ninth day
	early := created("calendly-early", at(-40, 0), slot("early-call", at(24+10, 0), 30, host))     // on its second day
	after := created("calendly-after", at(-30, 0), slot("after-call", at(10*24, 0), 30, host))     // back to back with its end
	orders := map[string][]booking.Event{
		"long first": {retreat, late, early, after},
		"long last":  {late, early, after, retreat},
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // on a database of its own
			e := newEnv(t)
			for i, ev := range order {
				e.deliver(t, one(fmt.Sprintf("long-%d", i), ev))
				e.catchUp(t)
			}
			assert.Equal(t, []string{"calendly-after", "calendly-retreat"}, e.holders(t))
			assert.Equal(t, []string{"conflict: calendly-early calendly-retreat", "conflict: calendly-late calendly-retreat"},
				itemSubjects(e.openItems(t)))
			incremental := snapshotOf(t, e)
			require.NoError(t, e.rm.Rebuild(context.Background(), nil))
			assert.Equal(t, incremental, snapshotOf(t, e), "rebuilt rows differ from incremental ones")

			// Recomputed from its own stored claim, the long booking releases both.
			e.deliver(t, one("long-cancel", canceled("calendly-retreat", at(-1, 0), "postponed")))
			e.catchUp(t)
			assert.Equal(t, []string{"calendly-after", "calendly-early", "calendly-late"}, e.holders(t))
			assert.Empty(t, e.openItems(t))
		})
	}
}
