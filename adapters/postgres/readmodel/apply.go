package readmodel

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

type streamData struct {
	events  []booking.Event
	version uint64
}

// applier applies one batch inside the batch's transaction.
type applier struct {
	m       *ReadModel
	tx      pgx.Tx
	streams map[booking.ID]streamData
	folds   map[booking.ID]booking.State
}

// load makes streams hold every id: from the cache, or read from the store, a few at a time.
func (a *applier) load(ctx context.Context, ids []booking.ID) error {
	var missing []booking.ID
	for _, id := range ids {
		if _, ok := a.streams[id]; ok {
			continue
		}
		stream := id.Stream()
		if evs, v, ok := a.m.cache.get(stream); ok {
			a.streams[id] = streamData{events: evs, version: v}
			continue
		}
		missing = append(missing, id)
	}
	if len(missing) == 0 {
		return nil
	}
	recs := make([][]eventlog.RecordedEvent, len(missing))
	errs := make([]error, len(missing))
	sem := make(chan struct{}, a.m.readConc)
	var wg sync.WaitGroup
	for i, id := range missing {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			recs[i], errs[i] = a.m.events.ReadStream(ctx, id.Stream())
		}()
	}
	wg.Wait()
	for i, id := range missing {
		if errs[i] != nil {
			return fmt.Errorf("read %s: %w", id.Stream(), errs[i])
		}
		versions := make([]uint64, len(recs[i]))
		evs := make([]booking.Event, len(recs[i]))
		for j, rec := range recs[i] {
			ev, err := a.m.codec.Decode(rec)
			if err != nil {
				return fmt.Errorf("decode %s@%d: %w", rec.StreamID, rec.Version, err)
			}
			versions[j], evs[j] = rec.Version, ev
		}
		if len(evs) == 0 {
			a.streams[id] = streamData{}
			continue
		}
		a.m.cache.put(id.Stream(), versions, evs)
		cached, v, _ := a.m.cache.get(id.Stream())
		a.streams[id] = streamData{events: cached, version: v}
	}
	return nil
}

func (a *applier) fold(id booking.ID) booking.State {
	if s, ok := a.folds[id]; ok {
		return s
	}
	s := booking.Fold(a.streams[id].events)
	a.folds[id] = s
	return s
}

// orderedSet keeps first-insertion order, so statements see their arguments in a stable order.
type orderedSet struct {
	items []string
	has   map[string]bool
}

func (s *orderedSet) add(v string) {
	if v == "" {
		return
	}
	if s.has == nil {
		s.has = map[string]bool{}
	}
	if !s.has[v] {
		s.has[v] = true
		s.items = append(s.items, v)
	}
}

func (a *applier) apply(ctx context.Context, touched []booking.ID) error {
	a.folds = map[booking.ID]booking.State{}
	var payTouched, bookTouched []booking.ID
	for _, id := range touched {
		evs := a.streams[id].events
		switch {
		case len(evs) == 0:
		case projections.IsPaymentOnly(evs):
			payTouched = append(payTouched, id)
		default:
			bookTouched = append(bookTouched, id)
		}
	}

	affected, err := a.applyPaymentStreams(ctx, touched, payTouched, bookTouched)
	if err != nil {
		return err
	}

	// The bookings to recompute: those with new events, those whose linked payments changed, and the
	// two ends of every reschedule link they carry (now or before).
	var set orderedSet
	for _, id := range bookTouched {
		set.add(string(id))
	}
	if len(affected) > 0 {
		linked, err := collectStrings(ctx, a.tx, `SELECT DISTINCT booking FROM calendar_booking_refs WHERE ref = ANY($1::text[])`, affected)
		if err != nil {
			return fmt.Errorf("bookings linked to changed payments: %w", err)
		}
		for _, id := range linked {
			set.add(id)
		}
	}
	if len(bookTouched) > 0 {
		oldFrom, err := collectStrings(ctx, a.tx, `SELECT rescheduled_from FROM calendar_bookings
WHERE booking = ANY($1) AND rescheduled_from <> ''`, idStrings(bookTouched))
		if err != nil {
			return fmt.Errorf("old reschedule links: %w", err)
		}
		for _, id := range oldFrom {
			set.add(id)
		}
		for _, id := range bookTouched {
			set.add(string(a.fold(id).RescheduledFrom))
		}
	}
	if err := a.load(ctx, toIDs(set.items)); err != nil {
		return err
	}
	var ids []booking.ID
	for _, s := range set.items {
		id := booking.ID(s)
		if evs := a.streams[id].events; len(evs) > 0 && !projections.IsPaymentOnly(evs) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}

	payments, closures, err := a.linkPayments(ctx, ids)
	if err != nil {
		return err
	}
	inputs := make([]projections.BookingInput, len(ids))
	for i, id := range ids {
		sd, f := a.streams[id], a.fold(id)
		inputs[i] = projections.BookingInput{Booking: id, Events: sd.events, StreamVersion: sd.version,
			Payments: payments[id], PaymentRefs: nonNil(closures[id]), Folded: &f}
	}
	comp, err := a.component(ctx, ids, inputs)
	if err != nil {
		return err
	}
	return a.write(ctx, projections.Recompute(comp))
}

// applyPaymentStreams stores the payment-only streams among touched, drops those that became bookings,
// and returns every payment reference whose links may have changed.
func (a *applier) applyPaymentStreams(ctx context.Context, touched, payTouched, bookTouched []booking.ID) ([]string, error) {
	stored, err := queryPaymentStreams(ctx, a.tx, `SELECT stream, refs FROM payment_streams WHERE stream = ANY($1)`, idStrings(touched))
	if err != nil {
		return nil, fmt.Errorf("read payment streams: %w", err)
	}
	old := map[booking.ID][]string{}
	for _, ps := range stored {
		old[ps.Stream] = ps.Refs
	}
	var affected orderedSet
	var rows []paymentRow
	var changed []string
	for _, id := range payTouched {
		s := a.fold(id)
		for _, r := range append(slices.Clone(s.PaymentRefs), old[id]...) {
			affected.add(r)
		}
		rows = append(rows, paymentRow{stream: id, state: s, version: a.streams[id].version})
		changed = append(changed, string(id))
	}
	for _, id := range bookTouched {
		if refs, ok := old[id]; ok {
			changed = append(changed, string(id))
			for _, r := range refs {
				affected.add(r)
			}
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	for _, table := range []string{"payment_streams", "payment_stream_refs"} {
		if _, err := a.tx.Exec(ctx, `DELETE FROM `+table+` WHERE stream = ANY($1)`, changed); err != nil {
			return nil, fmt.Errorf("replace payment streams: %w", err)
		}
	}
	if err := copyPayments(ctx, a.tx, "payment_streams", "payment_stream_refs", rows); err != nil {
		return nil, err
	}
	return affected.items, nil
}

// linkPayments finds the payment streams linked to each booking (transitively through shared refs)
// and loads their events.
func (a *applier) linkPayments(ctx context.Context, ids []booking.ID) (map[booking.ID][]projections.LinkedPayment, map[booking.ID][]string, error) {
	var want orderedSet
	for _, id := range ids {
		for _, r := range a.fold(id).PaymentRefs {
			want.add(r)
		}
	}
	var streams []projections.PaymentStream
	fetched := map[string]bool{}
	queried := map[string]bool{}
	for {
		var ask []string
		for _, r := range want.items {
			if !queried[r] {
				queried[r] = true
				ask = append(ask, r)
			}
		}
		if len(ask) == 0 {
			break
		}
		found, err := queryPaymentStreams(ctx, a.tx, `SELECT DISTINCT p.stream, p.refs FROM payment_stream_refs r
JOIN payment_streams p ON p.stream = r.stream WHERE r.ref = ANY($1::text[])`, ask)
		if err != nil {
			return nil, nil, fmt.Errorf("payment streams: %w", err)
		}
		for _, ps := range found {
			if fetched[string(ps.Stream)] {
				continue
			}
			fetched[string(ps.Stream)] = true
			streams = append(streams, ps)
			for _, r := range ps.Refs {
				want.add(r)
			}
		}
	}

	linkedOf := map[booking.ID][]booking.ID{}
	closures := map[booking.ID][]string{}
	var all []booking.ID
	index := projections.NewPaymentIndex(streams)
	for _, id := range ids {
		linked, closure := index.Link(a.fold(id).PaymentRefs)
		linkedOf[id], closures[id] = linked, closure
		all = append(all, linked...)
	}
	if err := a.load(ctx, all); err != nil {
		return nil, nil, err
	}
	payments := map[booking.ID][]projections.LinkedPayment{}
	for _, id := range ids {
		for _, p := range linkedOf[id] {
			payments[id] = append(payments[id], projections.LinkedPayment{Stream: p, Events: a.streams[p].events})
		}
	}
	return payments, closures, nil
}

// supersedingSQL reads the stored rows of the bookings rescheduled from one of $1. The non-empty test
// repeats the partial index's predicate: a generic plan cannot infer it from the parameter.
const supersedingSQL = `SELECT ` + bookingColumns + ` FROM calendar_bookings
WHERE rescheduled_from = ANY($1) AND rescheduled_from <> '' AND NOT (booking = ANY($1))`

// component loads what projections.Recompute needs to recompute ids besides their inputs. It drops
// their stored claims, then reads every stored claim connected by overlaps to those old claims or to
// the slots their folds want (a superset of the claims the new rows make, which is as good), the
// items of those bookings, and the stored rows of the bookings of the claims, of the bookings
// rescheduled from one of ids, and of those the open items name.
//
// This is the boundary where a booking's resource identifiers become claims on calendar resources.
func (a *applier) component(ctx context.Context, ids []booking.ID, inputs []projections.BookingInput) (projections.Component, error) {
	comp := projections.Component{Bookings: inputs}
	idS := idStrings(ids)
	var seedRes []int32
	var seedStart, seedEnd []time.Time
	old, err := a.tx.Query(ctx, `DELETE FROM calendar_slots WHERE booking = ANY($1) RETURNING resource_id, lower(during), upper(during)`, idS)
	if err == nil {
		var (
			r    int32
			s, e time.Time
		)
		_, err = pgx.ForEachRow(old, []any{&r, &s, &e}, func() error {
			seedRes, seedStart, seedEnd = append(seedRes, r), append(seedStart, s), append(seedEnd, e)
			return nil
		})
	}
	if err != nil {
		return comp, fmt.Errorf("drop old claims: %w", err)
	}
	var provided []string
	for _, id := range ids {
		if f := a.fold(id); f.Status == booking.StatusActive && f.HasSlot() {
			provided = append(provided, f.Slot.Resources...)
		}
	}
	links, err := loadLinks(ctx, a.tx, provided)
	if err != nil {
		return comp, err
	}
	comp.Canonical = func(r string) string {
		if n, ok := links[r]; ok {
			return n
		}
		return r
	}
	names := projections.CanonicalResources(provided, comp.Canonical)
	resourceID, err := a.m.resourceIDsOf(ctx, names)
	if err != nil {
		return comp, err
	}
	for _, id := range ids {
		if f := a.fold(id); f.Status == booking.StatusActive && f.HasSlot() {
			for _, r := range projections.CanonicalResources(f.Slot.Resources, comp.Canonical) {
				seedRes, seedStart, seedEnd = append(seedRes, resourceID[r]), append(seedStart, micro(f.Slot.Start)), append(seedEnd, micro(f.Slot.End))
			}
		}
	}
	var members orderedSet
	if len(seedRes) > 0 {
		if comp.Claims, err = connectedClaims(ctx, a.tx, seedRes, seedStart, seedEnd); err != nil {
			return comp, err
		}
		for _, c := range comp.Claims {
			members.add(string(c.Booking))
		}
	}
	scope := append(slices.Clone(idS), members.items...)
	if comp.Items, err = queryItems(ctx, a.tx, scopedItemsSQL, scope, idS); err != nil {
		return comp, fmt.Errorf("existing items: %w", err)
	}
	for _, it := range comp.Items {
		if it.Open() && it.Kind == projections.ItemConflict {
			members.add(string(it.Booking))
			members.add(string(it.OtherBooking))
		}
	}
	stored, err := loadBookings(ctx, a.tx, members.items)
	if err != nil {
		return comp, err
	}
	for _, id := range members.items { // in a stable order, so that writes lock rows in one
		if b, ok := stored[booking.ID(id)]; ok {
			comp.Stored = append(comp.Stored, b)
		}
	}
	rows, err := a.tx.Query(ctx, supersedingSQL, idS)
	if err != nil {
		return comp, fmt.Errorf("reschedule links: %w", err)
	}
	superseding, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (projections.Booking, error) { return scanBooking(r) })
	if err != nil {
		return comp, fmt.Errorf("reschedule links: %w", err)
	}
	for _, b := range superseding {
		if _, loaded := stored[b.Booking]; !loaded {
			comp.Stored = append(comp.Stored, b)
		}
	}
	return comp, nil
}

// write stores a recomputation. The claims go in an order where the holders present are always a
// subset of the final, overlap-free set, as the exclusion constraint checks row by row: releases of
// stored claims, then the new claims with their final holder flag, then stored claims that take a slot.
func (a *applier) write(ctx context.Context, ch projections.Changes) error {
	var release, take, restatus, status []string
	var holder []bool
	for _, b := range ch.Restatus {
		restatus = append(restatus, string(b.Booking))
		if b.Holder {
			take = append(take, string(b.Booking))
		} else {
			release = append(release, string(b.Booking))
		}
		status, holder = append(status, string(b.Status)), append(holder, b.Holder)
	}
	if len(release) > 0 {
		if _, err := a.tx.Exec(ctx, `UPDATE calendar_slots SET holder = false WHERE booking = ANY($1) AND holder`, release); err != nil {
			return fmt.Errorf("release slots: %w", err)
		}
	}
	names := make([]string, len(ch.Claims))
	for i, c := range ch.Claims {
		names[i] = c.Resource
	}
	resourceID, err := a.m.resourceIDsOf(ctx, names)
	if err != nil {
		return err
	}
	if err := copyClaims(ctx, a.tx, "calendar_slots", ch.Claims, ch.Holders, resourceID); err != nil {
		return err
	}
	if len(take) > 0 {
		if _, err := a.tx.Exec(ctx, `UPDATE calendar_slots SET holder = true WHERE booking = ANY($1)`, take); err != nil {
			return fmt.Errorf("take slots: %w", err)
		}
	}
	if len(status) > 0 {
		if _, err := a.tx.Exec(ctx, `UPDATE calendar_bookings b SET status = u.status, holder = u.holder, projected_at = now()
FROM unnest($1::text[], $2::text[], $3::boolean[]) AS u(booking, status, holder)
WHERE b.booking = u.booking`, restatus, status, holder); err != nil {
			return fmt.Errorf("update statuses of overlapping bookings: %w", err)
		}
	}
	// A row is replaced in the rebuild's encoding: deleted, then copied.
	for _, table := range []string{"calendar_bookings", "calendar_booking_refs"} {
		if _, err := a.tx.Exec(ctx, `DELETE FROM `+table+` WHERE booking = ANY($1)`, idStrings(rowIDs(ch.Rows))); err != nil {
			return fmt.Errorf("replace calendar rows: %w", err)
		}
	}
	if err := copyBookings(ctx, a.tx, "calendar_bookings", ch.Rows); err != nil {
		return err
	}
	if err := copyBookingRefs(ctx, a.tx, "calendar_booking_refs", ch.Rows); err != nil {
		return err
	}
	return writeItems(ctx, a.tx, ch.Items)
}

// connectedClaimsSQL returns every claim connected to the seed ranges by a chain of overlaps on a
// resource: the set whose slot assignment can change.
const connectedClaimsSQL = `WITH RECURSIVE seeds AS (
    SELECT * FROM unnest($1::integer[], $2::timestamptz[], $3::timestamptz[]) AS q(resource_id, s, e)
), comp(booking) AS (
    SELECT c.booking FROM seeds q
    JOIN calendar_slots c ON c.resource_id = q.resource_id AND c.during && tstzrange(q.s, q.e)
  UNION
    SELECT c2.booking FROM comp
    JOIN calendar_slots c1 ON c1.booking = comp.booking
    JOIN calendar_slots c2 ON c2.resource_id = c1.resource_id AND c2.during && c1.during
)
SELECT c.booking, c.resource, c.meeting, lower(c.during), upper(c.during), c.priority_at
FROM calendar_slots c WHERE c.booking IN (SELECT booking FROM comp)`

func connectedClaims(ctx context.Context, q querier, res []int32, start, end []time.Time) ([]projections.Claim, error) {
	rows, err := q.Query(ctx, connectedClaimsSQL, res, start, end)
	if err == nil {
		var claims []projections.Claim
		claims, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (c projections.Claim, err error) {
			return c, r.Scan(&c.Booking, &c.Resource, &c.Meeting, &c.Start, &c.End, &c.Priority)
		})
		if err == nil {
			return claims, nil
		}
	}
	return nil, fmt.Errorf("connected claims: %w", err)
}

// queryPaymentStreams reads (stream, refs) rows.
func queryPaymentStreams(ctx context.Context, q querier, sql string, args ...any) ([]projections.PaymentStream, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ps projections.PaymentStream, err error) {
		return ps, r.Scan(&ps.Stream, &ps.Refs)
	})
}

func collectStrings(ctx context.Context, q querier, sql string, args ...any) ([]string, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func idStrings(ids []booking.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

func toIDs(s []string) []booking.ID {
	out := make([]booking.ID, len(s))
	for i, v := range s {
		out[i] = booking.ID(v)
	}
	return out
}

func rowIDs(rows []projections.Booking) []booking.ID {
	out := make([]booking.ID, len(rows))
	for i, r := range rows {
		out[i] = r.Booking
	}
	return out
}
