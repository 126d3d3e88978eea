package readmodel_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"bookingledger/domain/booking"
)

// genScenario builds a realistic day of deliveries from a seed: plain bookings (some canceled, some
// marked no-show), Calendly reschedules (cancel + create pairs), Cal.com reschedules (one delivery with
// the new booking and the implied cancel), group meetings, requests confirmed or rejected, Acuity
// moves, true conflicts whose holder may be canceled, creates that arrive after their cancel, and
// Stripe payments on payment streams (failures, successes, refunds, linked through charge or intent).
// Slots fall on two hosts in one morning, so the parts also overlap each other.
func genScenario(seed uint64) []delivery {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var out []delivery
	hosts := []string{"https://api.calendly.com/users/HOST-A", "https://api.calendly.com/users/HOST-B"}
	host := func() string { return hosts[r.IntN(len(hosts))] }
	start := func() time.Time { return at(9+r.IntN(3), 15*r.IntN(4)) }
	length := func() int { return []int{30, 45, 60}[r.IntN(3)] }
	clock := at(-96, 0)
	// next returns provider times that increase, with the odd tie (same second) on purpose.
	next := func() time.Time {
		if r.IntN(8) > 0 {
			clock = clock.Add(time.Duration(1+r.IntN(50)) * time.Minute)
		}
		return clock
	}
	add := func(id string, evs ...booking.Event) {
		out = append(out, delivery{ID: id, Provider: evs[0].Provider, Events: evs})
	}
	n := 0
	id := func(provider string) booking.ID {
		n++
		return booking.ID(fmt.Sprintf("%s-%d-%d", provider, seed, n))
	}

	for range 3 { // plain bookings
		b := id("calendly")
		add(string(b)+"/created", created(b, next(), slot(string(b)+"/ev", start(), length(), host())))
		if r.IntN(10) < 4 {
			add(string(b)+"/canceled", canceled(b, next(), "invitee canceled"))
		}
		if r.IntN(10) < 3 {
			add(string(b)+"/no-show", event(b, "no-show", next(), booking.NoShowMarked{}))
			if r.IntN(2) == 0 {
				add(string(b)+"/no-show-deleted", event(b, "no-show-deleted", next(), booking.NoShowCleared{}))
			}
		}
	}
	for range 2 { // Calendly reschedule: cancel of the old invitee and create of the new, linked by URI
		old, nw := id("calendly"), id("calendly")
		add(string(old)+"/created", created(old, next(), slot(string(old)+"/ev", start(), length(), hosts[0])))
		t := next()
		add(string(old)+"/canceled", event(old, "canceled", t, booking.Canceled{Reason: "rescheduled", CanceledBy: "invitee", RescheduledTo: nw}))
		add(string(nw)+"/created", event(nw, "created", t.Add(time.Microsecond),
			booking.Scheduled{Slot: slot(string(nw)+"/ev", start(), length(), hosts[0]), Capacity: 1, RescheduledFrom: old}))
	}
	{ // Cal.com reschedule: no cancel is sent; the ledger records an implied one with the new booking
		old, nw := id("calcom"), id("calcom")
		series := string(old) + "/ical"
		add(string(old)+"/BOOKING_CREATED", created(old, next(), slot(series, start(), 30, hosts[1])))
		t := next()
		add(string(nw)+"/BOOKING_RESCHEDULED",
			event(nw, "created", t, booking.Scheduled{Slot: slot(series, start(), 30, hosts[1]), Capacity: 1, RescheduledFrom: old}),
			event(old, "implied-cancel", t, booking.Canceled{CanceledBy: "provider", RescheduledTo: nw, Implied: true}))
	}
	{ // group meeting: invitees of one meeting share its slot; one of them may cancel
		meeting, s, h := fmt.Sprintf("group-%d", seed), start(), host()
		for i := range 3 {
			b := id("calendly")
			add(string(b)+"/created", event(b, "created", next(), booking.Scheduled{Slot: slot(meeting, s, 60, h), Capacity: 5}))
			if i == 1 && r.IntN(2) == 0 {
				add(string(b)+"/canceled", canceled(b, next(), "cannot make it"))
			}
		}
	}
	{ // a true conflict: both active at the provider
		h, s := host(), start()
		first, second := id("calendly"), id("calcom")
		add(string(first)+"/created", created(first, next(), slot(string(first)+"/ev", s, 60, h)))
		add(string(second)+"/BOOKING_CREATED", created(second, next(), slot(string(second)+"/ical", s.Add(15*time.Minute), 60, h)))
		if r.IntN(2) == 0 {
			add(string(first)+"/canceled", canceled(first, next(), "double booked"))
		}
	}
	{ // Cal.com requests: one confirmed, one rejected
		ok, no := id("calcom"), id("calcom")
		add(string(ok)+"/BOOKING_REQUESTED", event(ok, "requested", next(), booking.Requested{Slot: slot(string(ok)+"/ical", start(), 30, host()), Capacity: 1}))
		add(string(no)+"/BOOKING_REQUESTED", event(no, "requested", next(), booking.Requested{Slot: slot(string(no)+"/ical", start(), 30, host()), Capacity: 1}))
		add(string(ok)+"/BOOKING_CREATED", event(ok, "created", next(), booking.Scheduled{Slot: slot(string(ok)+"/ical", start(), 30, host()), Capacity: 1}))
		add(string(no)+"/BOOKING_REJECTED", event(no, "rejected", next(), booking.Rejected{Reason: "host unavailable"}))
	}
	{ // Acuity: one appointment id across a move
		b := id("acuity")
		add(string(b)+"/scheduled", created(b, next(), slot(string(b), start(), 45, host())))
		add(string(b)+"/rescheduled", event(b, "rescheduled", next(), booking.Rescheduled{Slot: slot(string(b), start(), 45, host())}))
	}
	{ // a create stamped after its cancel (a re-sent create): kept, refused
		b := id("calcom")
		s, h := start(), host()
		add(string(b)+"/BOOKING_CREATED", created(b, next(), slot(string(b)+"/ical", s, 30, h)))
		add(string(b)+"/BOOKING_CANCELLED", canceled(b, next(), "changed plans"))
		add(string(b)+"/BOOKING_CREATED-again", event(b, "created-again", next(), booking.Scheduled{Slot: slot(string(b)+"/ical", s, 30, h), Capacity: 1}))
	}
	for i := range 2 { // payments on payment streams
		b := id("calendly")
		pi, ch := fmt.Sprintf("stripe:pi_%d_%d", seed, i), fmt.Sprintf("stripe:ch_%d_%d", seed, i)
		stream := booking.ID(fmt.Sprintf("stripe-pi_%d_%d", seed, i))
		add(string(b)+"/created", event(b, "created", next(), booking.Scheduled{Slot: slot(string(b)+"/ev", start(), 30, host()), Capacity: 1, PaymentRefs: []string{ch}}))
		t := next()
		if r.IntN(2) == 0 {
			add(string(stream)+"/payment_failed", event(stream, "payment_intent.payment_failed", t, booking.PaymentFailed{Refs: []string{pi}, Reason: "card_declined"}))
		}
		t = t.Add(time.Duration(r.IntN(2)) * time.Minute) // the success may share the failure's second
		add(string(stream)+"/succeeded", event(stream, "payment_intent.succeeded", t, booking.PaymentSucceeded{Refs: []string{pi, ch}, Amount: 4500, Currency: "eur"}))
		if r.IntN(2) == 0 {
			add(string(stream)+"/refunded", event(stream, "charge.refunded", next(), booking.PaymentRefunded{Refs: []string{ch, pi}, Amount: 4500, Currency: "eur"}))
		}
	}
	return out
}

// arrival shuffles deliveries and adds duplicates: retries of one delivery (same id) and the same
// business change as another delivery (new id, same events).
func arrival(r *rand.Rand, ds []delivery) []delivery {
	out := append([]delivery(nil), ds...)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	for i, d := range ds {
		if r.IntN(10) < 3 {
			dup := d
			if r.IntN(2) == 0 {
				dup.ID = fmt.Sprintf("%s/redelivered-%d", d.ID, i)
			}
			pos := r.IntN(len(out) + 1)
			out = append(out[:pos], append([]delivery{dup}, out[pos:]...)...)
		}
	}
	return out
}
