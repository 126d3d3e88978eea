package readmodel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/resource"
	"bookingledger/projections/calendar"
)

// applier applies one batch inside the batch's transaction.
type applier struct {
	m       *ReadModel
	tx      *batchTx
	streams map[booking.ID]cacheEntry
	folds   map[booking.ID]booking.State
	// born are the streams whose first event (version 1) is in the batch: the calendar has stored
	// nothing of theirs yet, as it stores a stream's rows only in the transaction that applies its
	// events (a batch that failed, or whose commit a database crash lost, lost its checkpoint with it).
	born map[booking.ID]bool
}

// load makes streams hold every id: from the cache, or read from the store, a few at a time.
func (a *applier) load(ctx context.Context, ids []booking.ID) error {
	var missing []booking.ID
	for _, id := range ids {
		if _, ok := a.streams[id]; ok {
			continue
		}
		if cached, ok := a.m.cache.get(id.Stream()); ok {
			a.streams[id] = cached
			continue
		}
		missing = append(missing, id)
	}
	if len(missing) == 0 {
		return nil
	}
	recs := make([][]eventlog.RecordedEvent, len(missing))
	errs := make([]error, len(missing))
	sem := make(chan struct{}, readConcurrency)
	var wg sync.WaitGroup
	for i, id := range missing {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			recs[i], errs[i] = a.m.events.ReadStream(ctx, id.Stream())
		})
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
			a.streams[id] = cacheEntry{}
			continue
		}
		a.streams[id] = a.m.cache.put(id.Stream(), versions, evs)
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
type orderedSet[T ~string] struct {
	items []T
	has   map[T]bool
}

func (s *orderedSet[T]) add(vs ...T) {
	if s.has == nil {
		s.has = map[T]bool{}
	}
	for _, v := range vs {
		if v != "" && !s.has[v] {
			s.has[v] = true
			s.items = append(s.items, v)
		}
	}
}

func (a *applier) apply(ctx context.Context, touched []booking.ID) error {
	a.folds = map[booking.ID]booking.State{}
	var payTouched, bookTouched []booking.ID
	for _, id := range touched {
		evs := a.streams[id].events
		switch {
		case len(evs) == 0:
		case calendar.IsPaymentOnly(evs):
			payTouched = append(payTouched, id)
		default:
			bookTouched = append(bookTouched, id)
		}
	}

	// What the touched streams stored before: nothing for a stream born in this batch, whose rows
	// only this batch's events can write, so a batch of new bookings skips the read (and its round
	// trip: its BEGIN rides with the next one).
	var stored []calendar.PaymentStream
	var oldFrom []booking.ID
	if slices.ContainsFunc(touched, func(id booking.ID) bool { return !a.born[id] }) {
		queueQuery(a.tx, "read payment streams", `SELECT stream, refs FROM payment_streams WHERE stream = ANY($1)`, []any{idStrings(touched)},
			pgx.RowToStructByPos[calendar.PaymentStream], &stored)
		if len(bookTouched) > 0 {
			// Empty links are dropped by set.add: a test for them here would plan (generically) as a
			// walk of the partial index on the links.
			queueQuery(a.tx, "old reschedule links", `SELECT rescheduled_from FROM calendar_bookings WHERE booking = ANY($1)`, []any{idStrings(bookTouched)},
				pgx.RowTo[booking.ID], &oldFrom)
		}
		if err := a.tx.flush(ctx); err != nil {
			return err
		}
	}
	affected := a.applyPaymentStreams(stored, payTouched, bookTouched)

	// The bookings to recompute: those with new events, those whose linked payments changed, and the
	// two ends of every reschedule link they carry (now or before).
	var set orderedSet[booking.ID]
	set.add(bookTouched...)
	if len(affected) > 0 {
		linked, err := queryRows(ctx, a.tx, pgx.RowTo[booking.ID], `SELECT DISTINCT booking FROM calendar_booking_refs WHERE ref = ANY($1::text[])`, affected)
		if err != nil {
			return fmt.Errorf("bookings linked to changed payments: %w", err)
		}
		set.add(linked...)
	}
	set.add(oldFrom...)
	for _, id := range bookTouched {
		set.add(a.fold(id).RescheduledFrom)
	}
	if err := a.load(ctx, set.items); err != nil {
		return err
	}
	// Every occurrence of the series of a booking recomputed: a cancel of all remaining occurrences,
	// on one of them, cancels the others, and an occurrence recorded after it is canceled with it.
	var series orderedSet[string]
	for _, id := range set.items {
		series.add(a.fold(id).Series)
	}
	if len(series.items) > 0 {
		members, err := queryRows(ctx, a.tx, pgx.RowTo[booking.ID], seriesMembersSQL, series.items)
		if err != nil {
			return fmt.Errorf("occurrences of recomputed series: %w", err)
		}
		set.add(members...)
		if err := a.load(ctx, set.items); err != nil {
			return err
		}
	}
	var ids []booking.ID
	for _, id := range set.items {
		if evs := a.streams[id].events; len(evs) > 0 && !calendar.IsPaymentOnly(evs) {
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
	inputs := make([]calendar.BookingInput, len(ids))
	for i, id := range ids {
		sd, f := a.streams[id], a.fold(id)
		inputs[i] = calendar.BookingInput{Booking: id, Events: sd.events, StreamVersion: sd.version,
			Payments: payments[id], PaymentRefs: nonNil(closures[id]), Folded: &f}
	}
	comp, err := a.component(ctx, ids, inputs)
	if err != nil {
		return err
	}
	a.write(ids, calendar.Recompute(comp))
	return nil
}

// applyPaymentStreams stores the payment-only streams among the touched ones (stored: those of them
// already stored), drops those that became bookings, and returns every payment reference whose
// links may have changed.
func (a *applier) applyPaymentStreams(stored []calendar.PaymentStream, payTouched, bookTouched []booking.ID) []string {
	old := map[booking.ID][]string{}
	for _, ps := range stored {
		old[ps.Stream] = ps.Refs
	}
	var affected orderedSet[string]
	var rows []paymentRow
	var changed []string
	for _, id := range payTouched {
		s := a.fold(id)
		affected.add(s.PaymentRefs...)
		affected.add(old[id]...)
		rows = append(rows, paymentRow{stream: id, state: s, version: a.streams[id].version})
		changed = append(changed, string(id))
	}
	for _, id := range bookTouched {
		if refs, ok := old[id]; ok {
			changed = append(changed, string(id))
			affected.add(refs...)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	for _, table := range []string{"payment_streams", "payment_stream_refs"} {
		a.tx.exec("replace payment streams", `DELETE FROM `+table+` WHERE stream = ANY($1)`, changed)
	}
	var refs, refStreams []string
	for _, p := range rows {
		a.tx.exec("insert payment stream "+string(p.stream), insertPaymentStreamSQL, paymentValues(p)...)
		for _, r := range p.state.PaymentRefs {
			refs, refStreams = append(refs, r), append(refStreams, string(p.stream))
		}
	}
	if len(refs) > 0 {
		a.tx.exec("insert payment stream refs", `INSERT INTO payment_stream_refs (ref, stream) SELECT * FROM unnest($1::text[], $2::text[])`,
			refs, refStreams)
	}
	return affected.items
}

// linkPayments finds the payment streams linked to each booking (transitively through shared refs)
// and loads their events.
func (a *applier) linkPayments(ctx context.Context, ids []booking.ID) (map[booking.ID][]calendar.LinkedPayment, map[booking.ID][]string, error) {
	var want orderedSet[string]
	for _, id := range ids {
		want.add(a.fold(id).PaymentRefs...)
	}
	var streams []calendar.PaymentStream
	var fetched orderedSet[booking.ID]
	for asked := 0; asked < len(want.items); {
		ask := want.items[asked:] // the refs not asked for yet: want only grows
		asked = len(want.items)
		found, err := queryRows(ctx, a.tx, pgx.RowToStructByPos[calendar.PaymentStream], `SELECT DISTINCT p.stream, p.refs FROM payment_stream_refs r
JOIN payment_streams p ON p.stream = r.stream WHERE r.ref = ANY($1::text[])`, ask)
		if err != nil {
			return nil, nil, fmt.Errorf("payment streams: %w", err)
		}
		for _, ps := range found {
			if !fetched.has[ps.Stream] {
				fetched.add(ps.Stream)
				streams = append(streams, ps)
				want.add(ps.Refs...)
			}
		}
	}
	// Every stream found is linked to one of ids at least: load them all.
	if err := a.load(ctx, fetched.items); err != nil {
		return nil, nil, err
	}
	index := calendar.NewPaymentIndex(streams)
	payments := map[booking.ID][]calendar.LinkedPayment{}
	closures := map[booking.ID][]string{}
	for _, id := range ids {
		linked, closure := index.Link(a.fold(id).PaymentRefs)
		closures[id] = closure
		for _, p := range linked {
			payments[id] = append(payments[id], calendar.LinkedPayment{Stream: p, Events: a.streams[p].events})
		}
	}
	return payments, closures, nil
}

// seriesMembersSQL reads the bookings of the series $1. The non-empty test repeats the partial
// index's predicate: a generic plan cannot infer it from the parameter.
const seriesMembersSQL = `SELECT booking FROM calendar_bookings WHERE series = ANY($1) AND series <> ''`

// supersedingSQL reads the stored rows of the bookings rescheduled from one of $1. The non-empty test
// repeats the partial index's predicate: a generic plan cannot infer it from the parameter.
const supersedingSQL = `SELECT ` + bookingColumns + ` FROM calendar_bookings
WHERE rescheduled_from = ANY($1) AND rescheduled_from <> '' AND NOT (booking = ANY($1))`

// component loads what calendar.Recompute needs to recompute ids besides their inputs: every
// stored claim of other bookings connected by overlaps to the stored claims of ids or to the slots
// their folds want (a superset of the claims the new rows make, which is as good), the
// items of those bookings, and the stored rows of the bookings of the claims, of the bookings
// rescheduled from one of ids, and of those the open items name.
//
// This is the boundary where a booking's resource identifiers become claims on calendar resources.
func (a *applier) component(ctx context.Context, ids []booking.ID, inputs []calendar.BookingInput) (calendar.Component, error) {
	comp := calendar.Component{Bookings: inputs}
	idS := idStrings(ids)
	// The seeds go by the names the bookings give; connectedClaimsSQL finds their canonical resources
	// itself, so that the links are read in the same round trip (for the Go rule) as the claims.
	var seedRes []string
	var seedStart, seedEnd []time.Time
	for _, id := range ids {
		if f := a.fold(id); f.Status == booking.StatusActive && f.HasSlot() {
			for _, r := range calendar.CanonicalResources(f.Slot.Resources, nil) {
				seedRes, seedStart, seedEnd = append(seedRes, r), append(seedStart, micro(f.Slot.Start)), append(seedEnd, micro(f.Slot.End))
			}
		}
	}
	var links []map[string]string
	if len(seedRes) > 0 {
		queueQuery(a.tx, "resource links", loadLinksSQL, []any{seedRes}, pgx.RowTo[map[string]string], &links)
	}
	var members orderedSet[string]
	var superseding []calendar.Booking
	queueQuery(a.tx, "connected claims", connectedClaimsSQL, []any{seedRes, seedStart, seedEnd, idS}, pgx.RowToStructByPos[calendar.Claim], &comp.Claims)
	queueQuery(a.tx, "reschedule links", supersedingSQL, []any{idS}, scanBooking, &superseding)
	// The items of ids go in the same round trip; those of the bookings the claims connect them to,
	// which only the claims name, are read after them when there are any.
	queueQuery(a.tx, "existing items", scopedItemsSQL, []any{idS, idS}, scanItem, &comp.Items)
	if err := a.tx.flush(ctx); err != nil {
		return comp, err
	}
	var linked map[string]string // one row when asked
	if len(links) == 1 {
		linked = links[0]
	}
	comp.Canonical = resource.FromLinks(linked).Canonical
	for _, c := range comp.Claims {
		members.add(string(c.Booking))
	}
	if len(members.items) > 0 {
		more, err := queryItems(ctx, a.tx, scopedItemsSQL, members.items, []string{})
		if err != nil {
			return comp, fmt.Errorf("existing items: %w", err)
		}
		read := make(map[int64]bool, len(comp.Items))
		for _, it := range comp.Items {
			read[it.ID] = true
		}
		for _, it := range more { // a conflict between a booking of ids and one connected: read twice
			if !read[it.ID] {
				comp.Items = append(comp.Items, it)
			}
		}
	}
	for _, it := range comp.Items {
		if it.Open() && it.Kind == calendar.ItemConflict {
			members.add(string(it.Booking), string(it.OtherBooking))
		}
	}
	stored, err := loadBookingsFrom(ctx, a.tx, "calendar_bookings", members.items)
	if err != nil {
		return comp, err
	}
	for _, id := range members.items { // in a stable order, so that writes lock rows in one
		if b, ok := stored[booking.ID(id)]; ok {
			comp.Stored = append(comp.Stored, b)
		}
	}
	for _, b := range superseding {
		if _, loaded := stored[b.Booking]; !loaded {
			comp.Stored = append(comp.Stored, b)
		}
	}
	return comp, nil
}

// write queues the writes of a recomputation. The claims go in an order where the holders present are
// always a subset of the final, overlap-free set, as the exclusion constraint checks row by row: the
// old claims of the recomputed bookings go and stored claims are released, then the new claims come
// with their final holder flag, then stored claims take a slot.
func (a *applier) write(ids []booking.ID, ch calendar.Changes) {
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
	idS := idStrings(ids) // the bookings of ch.Rows
	a.tx.exec("drop old claims", `DELETE FROM calendar_slots WHERE booking = ANY($1)`, idS)
	if len(release) > 0 {
		a.tx.exec("release slots", `UPDATE calendar_slots SET holder = false WHERE booking = ANY($1) AND holder`, release)
	}
	if n := len(ch.Claims); n > 0 {
		bookings, resources, meetings := make([]string, n), make([]string, n), make([]string, n)
		starts, ends, priorities := make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
		holders := make([]bool, n)
		for i, c := range ch.Claims {
			bookings[i], resources[i], meetings[i] = string(c.Booking), c.Resource, c.Meeting
			starts[i], ends[i], priorities[i], holders[i] = micro(c.Start), micro(c.End), c.Priority, ch.Holders[c.Booking]
		}
		a.tx.exec("number resources", numberResourcesSQL, resources)
		a.tx.exec(fmt.Sprintf("insert %d claims", n), insertClaimsSQL, bookings, resources, meetings, starts, ends, priorities, holders)
	}
	if len(take) > 0 {
		a.tx.exec("take slots", `UPDATE calendar_slots SET holder = true WHERE booking = ANY($1)`, take)
	}
	if len(status) > 0 {
		a.tx.exec("update statuses of overlapping bookings", `UPDATE calendar_bookings b SET status = u.status, holder = u.holder, projected_at = now()
FROM unnest($1::text[], $2::text[], $3::boolean[]) AS u(booking, status, holder)
WHERE b.booking = u.booking`, restatus, status, holder)
	}
	// The rows go in the rebuild's encoding, all in one statement, and their payment references from
	// the same columns.
	if len(ch.Rows) > 0 {
		columns, err := bookingArrays(ch.Rows)
		if err != nil {
			a.tx.fail(err)
			return
		}
		a.tx.exec(fmt.Sprintf("write %d calendar rows", len(ch.Rows)), upsertBookingsSQL, columns...)
		a.tx.exec("replace booking payment refs", `DELETE FROM calendar_booking_refs WHERE booking = ANY($1::text[])`, columns[0])
		if slices.ContainsFunc(ch.Rows, func(b calendar.Booking) bool { return len(b.PaymentRefs) > 0 }) {
			a.tx.exec("insert booking payment refs", `INSERT INTO calendar_booking_refs (ref, booking)
SELECT unnest(u.refs::text[]), u.booking FROM unnest($1::text[], $2::text[]) AS u(booking, refs)`,
				columns[0], columns[slices.Index(copyBookingColumns, "payment_refs")])
		}
	}
	a.tx.itemWrites(ch.Items)
}

// numberResourcesSQL numbers the resources of $1 that have none. Only those are inserted: a conflict
// would still draw a number from the identity's sequence.
const numberResourcesSQL = `INSERT INTO calendar_resources (resource)
SELECT DISTINCT r FROM unnest($1::text[]) AS r WHERE NOT EXISTS (SELECT 1 FROM calendar_resources c WHERE c.resource = r)
ON CONFLICT (resource) DO NOTHING`

// insertClaimsSQL writes claims on their resources' numbers (numberResourcesSQL gave every one a number;
// a claim without one fails on resource_id's NOT NULL).
const insertClaimsSQL = `INSERT INTO calendar_slots (booking, resource_id, resource, meeting, during, priority_at, holder)
SELECT u.booking, (SELECT r.id FROM calendar_resources r WHERE r.resource = u.resource), u.resource, u.meeting,
    tstzrange(u.s, u.e), u.priority_at, u.holder
FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[], $7::boolean[])
    AS u(booking, resource, meeting, s, e, priority_at, holder)`

const insertPaymentStreamSQL = `INSERT INTO payment_streams (stream, refs, payment_status, stream_version, updated_at) VALUES ($1, $2, $3, $4, $5)`

// upsertBookingsSQL writes the rows of bookingArrays' columns (bookingTypes are their types, text
// for an array's literal), each inserted or replacing its booking's stored row in place: a new
// booking costs one index probe, where a delete first cost two.
var upsertBookingsSQL = func() string {
	params, values := make([]string, len(bookingTypes)), make([]string, len(bookingTypes))
	for j, t := range bookingTypes {
		params[j], values[j] = fmt.Sprintf("$%d::%s[]", j+1, strings.TrimSuffix(t, "[]")), copyBookingColumns[j]+"::"+t
	}
	columns := strings.Join(copyBookingColumns, ", ")
	return `INSERT INTO calendar_bookings (` + columns + `) SELECT ` + strings.Join(values, ", ") + ` FROM unnest(` + strings.Join(params, ", ") +
		`) AS u(` + columns + `) ON CONFLICT (booking) DO UPDATE SET (` + strings.Join(copyBookingColumns[1:], ", ") + `, projected_at) = ROW(EXCLUDED.` +
		strings.Join(copyBookingColumns[1:], ", EXCLUDED.") + `, now())`
}()

var bookingTypes = []string{"text", "text", "text", "text[]", "tstzrange", "text", "text", "boolean", "text", "text[]", "text[]", "integer",
	"boolean", "timestamptz", "timestamptz", "bigint", "integer", "text", "text", "text", "text", "boolean", "jsonb", "text", "text[]", "text[]"}

// connectedClaimsSQL returns every claim of a booking other than those of $4 connected by a chain of
// overlaps on a resource (bl_overlapping_claims, migration 0185) to a seed: the slots $1–$3 (by the
// resource's name as the booking gives it, which its link, if any, maps to its canonical resource, as
// resource.State.Canonical does) and the stored claims of $4.
// That is the set whose slot assignment can change when $4 are recomputed.
//
// The walk is breadth-first with each step's bookings as one array row (frontier) and every booking
// found so far in another (seen), so the recursion is a UNION ALL of one row per step. A UNION of
// booking rows would say the same, but PostgreSQL sizes the hash table that removes its duplicates
// by the generic plan's estimate (tens of thousands of rows, as it assumes ten steps) and clears it at
// every execution: measured, that start-up cost more than the rest of the batch's statements together.
const connectedClaimsSQL = `WITH RECURSIVE seeds AS (
    SELECT r.id AS resource_id, tstzrange(q.s, q.e) AS during
    FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) AS q(resource, s, e)
    LEFT JOIN calendar_resource_links l ON l.resource = q.resource
    JOIN calendar_resources r ON r.resource = coalesce(l.name, q.resource)
  UNION ALL
    SELECT resource_id, during FROM calendar_slots WHERE booking = ANY($4::text[])
), walk(frontier, seen) AS (
    SELECT f.found, f.found FROM (
        SELECT array_agg(DISTINCT c.booking) AS found
        FROM seeds q, bl_overlapping_claims(q.resource_id, q.during) c(booking)
        WHERE c.booking <> ALL($4::text[])) f
    WHERE f.found IS NOT NULL
  UNION ALL
    SELECT n.found, w.seen || n.found FROM walk w, LATERAL (
        SELECT array_agg(DISTINCT c.booking) AS found
        FROM calendar_slots q, bl_overlapping_claims(q.resource_id, q.during) c(booking)
        WHERE q.booking = ANY(w.frontier) AND c.booking <> ALL($4::text[]) AND c.booking <> ALL(w.seen)) n
    WHERE n.found IS NOT NULL
)
SELECT c.booking, c.resource, c.meeting, lower(c.during), upper(c.during), c.priority_at
FROM calendar_slots c WHERE c.booking = ANY(ARRAY(SELECT unnest(frontier) FROM walk))`

func idStrings(ids []booking.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

// batchTx is a batch's transaction whose statements wait: writes and reads are queued and sent
// together, in one round trip, when a result is needed. A transaction takes its xid at its first
// write, and by ADR 0002's rule every event committed after that stays unreadable in the log until
// the transaction ends: with the writes last, that window is the last round trip and the commit
// instead of the whole batch.
//
// The transaction is the connection's own, not a pgx.Tx: its BEGIN goes in the first round trip,
// ahead of the first statements sent, and its COMMIT in the last, after the writes. That COMMIT runs
// before Go reads any answer of its round trip, which is safe because a statement that fails makes
// the server skip the rest of the round trip, the COMMIT included: the checkpoint's compare-and-set,
// which leads the writes, fails when refused (checkpoint.advanceSQL), and Go-side reads of the last
// round trip are not allowed (finish sends queued writes only). A failed batch ends with rollback.
type batchTx struct {
	conn   *pgx.Conn
	begun  bool      // BEGIN was sent
	batch  pgx.Batch // each statement with the callback that reads its result
	writes bool      // a write is queued
	reads  bool      // a read is queued
	// lead goes ahead of the first writes sent: the checkpoint's compare-and-set, so that a runner
	// that finds it moved runs none of them.
	lead []*pgx.QueuedQuery
	err  error // a statement that failed or could not be queued
}

// exec queues a write; what names it in errors.
func (b *batchTx) exec(what, sql string, args ...any) {
	b.writes = true
	b.batch.Queue(sql, args...).Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
}

// queueQuery queues a read on b; its rows go to dst when the queue is sent.
func queueQuery[T any](b *batchTx, what, sql string, args []any, to pgx.RowToFunc[T], dst *[]T) {
	b.reads = true
	b.batch.Queue(sql, args...).Query(func(rows pgx.Rows) (err error) {
		if *dst, err = pgx.CollectRows(rows, to); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

func (b *batchTx) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// flush sends what is queued and returns the first failure.
func (b *batchTx) flush(ctx context.Context) error { return b.send(ctx, false) }

// finish sends what is still queued, and the lead statement in any case, then COMMIT: the end of the
// batch. Reads must have been sent before: the server runs the COMMIT before Go reads their rows.
func (b *batchTx) finish(ctx context.Context) error {
	if b.reads && b.err == nil {
		b.fail(errors.New("a read queued for the batch's last round trip")) // a bug: nothing is sent
	}
	b.queueCommit()
	return b.send(ctx, true)
}

// queueCommit queues the COMMIT. A COMMIT the server answers with ROLLBACK (a transaction that had
// failed) is a failure too, though the protocol does not report it as an error.
func (b *batchTx) queueCommit() {
	b.batch.Queue("COMMIT").Fn = func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("the server answered %q", tag)
		}
		if err != nil {
			return fmt.Errorf("commit the batch: %w", err)
		}
		return nil
	}
}

func (b *batchTx) send(ctx context.Context, last bool) error {
	if b.err != nil {
		return b.err
	}
	if b.lead != nil && (b.writes || last) {
		b.batch.QueuedQueries = append(b.lead, b.batch.QueuedQueries...)
		b.lead = nil
	}
	if b.batch.Len() == 0 {
		return nil
	}
	if !b.begun {
		b.batch.QueuedQueries = append(beginBatch(), b.batch.QueuedQueries...)
		b.begun = true
	}
	// Close runs the callbacks in order and returns the first failure: the statements after it
	// were skipped.
	b.fail(b.conn.SendBatch(ctx, &b.batch).Close())
	b.batch, b.writes, b.reads = pgx.Batch{}, false, false
	return b.err
}

// Query sends the queued writes, then reads.
func (b *batchTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := b.flush(ctx); err != nil {
		return nil, err
	}
	if !b.begun {
		var begin pgx.Batch
		begin.QueuedQueries = beginBatch()
		if err := b.conn.SendBatch(ctx, &begin).Close(); err != nil {
			b.fail(err)
			return nil, err
		}
		b.begun = true
	}
	return b.conn.Query(ctx, sql, args...)
}

// rollback ends a batch that failed. When the ROLLBACK cannot be sent either, the connection stays in
// its transaction and the pool, which destroys such a connection when it is released, closes it.
func (b *batchTx) rollback() {
	if b.conn.IsClosed() || b.conn.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
	defer cancel()
	_, _ = b.conn.Exec(ctx, "ROLLBACK")
}

const rollbackTimeout = 5 * time.Second

// beginBatch returns the statements that begin a batch's transaction (ADR 0019): generic plans, made
// once per connection rather than at every execution, and a commit that does not wait for the WAL
// flush, as the read model is derived from the log and a batch a database crash loses is lost with
// its checkpoint, applied again. The settings are one statement, set_config's local form.
func beginBatch() []*pgx.QueuedQuery {
	return []*pgx.QueuedQuery{
		{SQL: "BEGIN", Fn: execResult("begin the batch")},
		{SQL: beginSettingsSQL, Fn: execResult("set the batch's planning")},
	}
}

func execResult(what string) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
}

var beginSettingsSQL = func() string {
	var calls []string
	for _, setting := range append(slices.Clone(batchPlanning), "synchronous_commit = off") {
		name, value, ok := strings.Cut(setting, " = ")
		if !ok {
			panic("setting without ' = ': " + setting)
		}
		calls = append(calls, fmt.Sprintf("set_config('%s', '%s', true)", name, value))
	}
	return "SELECT " + strings.Join(calls, ", ")
}()
