package readmodel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

// A replay from the start of the log (a rebuild) is loaded in bulk: writing every batch would rewrite
// a booking's row and claims each time one of its events shows up, and recompute its overlapping set
// each time. Instead the runner hands the replay to Buffer, which only decodes, and then calls Flush:
// it computes every row once, in memory, with projections.Recompute over the whole calendar (compute),
// loads the result with COPY into staging tables (staging) and swaps those in, in one transaction
// together with the checkpoint, the reconciliation items and the end of the rebuild (swap,
// rebuild_swap.go). A crash before that commit leaves the checkpoint at the start: the next runner
// simply starts the replay again. Past bufferLimit events the runner flushes early and applies the
// rest of the log incrementally.

// replay is what Buffer took: every stream's events, deduplicated, up to position last.
type replay struct {
	streams map[string]*cacheEntry
	events  int64
	last    eventlog.Position
}

func (r *replay) add(stream string, version uint64, ev booking.Event) {
	e := r.streams[stream]
	if e == nil {
		e = &cacheEntry{stream: stream}
		r.streams[stream] = e
	}
	e.add(version, ev)
}

// flush writes what Buffer took and ends the rebuild. The caller holds m.mu.
func (m *ReadModel) flush(ctx context.Context) error {
	if m.replay == nil {
		m.replay = &replay{streams: map[string]*cacheEntry{}, last: m.pos}
	}
	// The staging tables are PostgreSQL's work and the computation is ours: they overlap.
	type staged struct {
		s   *staging
		err error
	}
	stagedC := make(chan staged, 1)
	go func() {
		s, err := m.createStaging(ctx)
		stagedC <- staged{s, err}
	}()
	payments, comp := m.bulkInputs()
	items, err := queryItems(ctx, m.pool, existingItemsSQL)
	if err != nil {
		st := <-stagedC
		m.dropStagingQuietly(st.s)
		return fmt.Errorf("existing items: %w", err)
	}
	comp.Items = items
	ch := projections.Recompute(comp)
	st := <-stagedC
	if st.err != nil {
		return st.err
	}
	if err := m.writeBulk(ctx, st.s, payments, ch); err != nil {
		m.dropStagingQuietly(st.s)
		return fmt.Errorf("write rebuilt read model: %w", err)
	}
	m.pos, m.replay = m.replay.last, nil
	return nil
}

// bulkInputs gathers the buffered streams: the payment-only ones as rows to store, the others as the
// inputs of one component, the whole calendar.
func (m *ReadModel) bulkInputs() ([]paymentRow, projections.Component) {
	type stream struct {
		id      booking.ID
		events  []booking.Event
		version uint64
		state   booking.State
	}
	// Streams are large values: they are gathered once, presized, and sorted by pointer.
	all := make([]stream, 0, len(m.replay.streams))
	for _, e := range m.replay.streams {
		if id, ok := booking.FromStream(e.stream); ok && len(e.events) > 0 {
			all = append(all, stream{id: id, events: e.events, version: e.version})
		}
	}
	paymentOnly := make([]bool, len(all))
	parallel(len(all), func(i int) {
		all[i].state = booking.Fold(all[i].events)
		paymentOnly[i] = projections.IsPaymentOnly(all[i].events)
	})
	bookings := make([]*stream, 0, len(all))
	var payments []*stream
	for i := range all {
		if paymentOnly[i] {
			payments = append(payments, &all[i])
		} else {
			bookings = append(bookings, &all[i])
		}
	}
	slices.SortFunc(bookings, func(a, b *stream) int { return compareID(a.id, b.id) })
	slices.SortFunc(payments, func(a, b *stream) int { return compareID(a.id, b.id) })

	payStreams := make([]projections.PaymentStream, len(payments))
	payEvents := make(map[booking.ID][]booking.Event, len(payments))
	prows := make([]paymentRow, len(payments))
	for i, p := range payments {
		payStreams[i] = projections.PaymentStream{Stream: p.id, Refs: p.state.PaymentRefs}
		payEvents[p.id] = p.events
		prows[i] = paymentRow{stream: p.id, state: p.state, version: p.version}
	}
	index := projections.NewPaymentIndex(payStreams)
	inputs := make([]projections.BookingInput, len(bookings))
	parallel(len(bookings), func(i int) {
		b := bookings[i]
		linked, closure := index.Link(b.state.PaymentRefs)
		var linkedPayments []projections.LinkedPayment
		for _, p := range linked {
			linkedPayments = append(linkedPayments, projections.LinkedPayment{Stream: p, Events: payEvents[p]})
		}
		inputs[i] = projections.BookingInput{Booking: b.id, Events: b.events, StreamVersion: b.version,
			Payments: linkedPayments, PaymentRefs: nonNil(closure), Folded: &b.state}
	})
	return prows, projections.Component{Bookings: inputs, Canonical: m.bufLinks.Canonical}
}

// writeBulk loads a rebuilt calendar into stage (in place when stage is nil) and swaps it in, in one
// transaction with the checkpoint, the reconciliation items and the end of the rebuild.
func (m *ReadModel) writeBulk(ctx context.Context, stage *staging, payments []paymentRow, ch projections.Changes) error {
	var names []string
	seen := map[string]bool{}
	for _, c := range ch.Claims {
		if !seen[c.Resource] {
			seen[c.Resource] = true
			names = append(names, c.Resource)
		}
	}
	resourceID, err := m.resourceIDsOf(ctx, names)
	if err != nil {
		return err
	}
	jobs := append(loadJobs(ch.Rows, ch.Claims, ch.Holders, resourceID), func(ctx context.Context, c copier, table func(string) string) error {
		return copyPayments(ctx, c, table("payment_streams"), table("payment_stream_refs"), payments)
	})
	if stage != nil {
		ld := m.startLoad(ctx, stage)
		for _, j := range jobs {
			ld.add(j)
		}
		if err := ld.wait(); err != nil {
			return err
		}
	}
	return pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := checkpoint.Advance(ctx, tx, ProjectionName, m.pos, m.replay.last, int(m.replay.events)); err != nil {
			return err
		}
		if err := writeLinks(ctx, tx, m.bufLinks); err != nil {
			return err
		}
		if stage != nil {
			if err := stage.swap(ctx, tx); err != nil {
				return err
			}
		} else {
			// Empty already (the reset did it in the transaction that moved the checkpoint to the
			// start); repeated so that COPY can never meet a row.
			if _, err := tx.Exec(ctx, `TRUNCATE `+strings.Join(rebuildTables, ", ")); err != nil {
				return err
			}
			for _, j := range jobs {
				if err := j(ctx, tx, func(t string) string { return t }); err != nil {
					return err
				}
			}
		}
		if err := writeItems(ctx, tx, ch.Items); err != nil {
			return err
		}
		if err := checkpoint.EndRebuild(ctx, tx, ProjectionName); err != nil {
			return err
		}
		if m.failAfterApply != nil {
			return m.failAfterApply()
		}
		return nil
	})
}

// loadJobs splits the write of the calendar into parts that can load at once: the calendar rows with
// their payment references first (the largest part), then the claims by resource (a resource's claims
// are checked against each other, so they stay in one part). The claims take most of the load's
// time, so they are split in more parts than there are connections, which evens out the connections.
func loadJobs(rows []projections.Booking, claims []projections.Claim, holders map[booking.ID]bool, resourceID map[string]int32) []loadJob {
	parts := make([][]projections.Claim, rebuildClaimParts)
	for k := range parts {
		parts[k] = make([]projections.Claim, 0, len(claims)/rebuildClaimParts+len(claims)/8)
	}
	for _, c := range claims {
		k := int(resourceID[c.Resource]) % rebuildClaimParts
		parts[k] = append(parts[k], c)
	}
	jobs := []loadJob{func(ctx context.Context, c copier, table func(string) string) error {
		if err := copyBookings(ctx, c, table("calendar_bookings"), rows); err != nil {
			return err
		}
		return copyBookingRefs(ctx, c, table("calendar_booking_refs"), rows)
	}}
	for _, part := range parts {
		jobs = append(jobs, func(ctx context.Context, c copier, table func(string) string) error {
			return copyClaims(ctx, c, table("calendar_slots"), part, holders, resourceID)
		})
	}
	return jobs
}

// rebuildClaimParts is the number of parts a rebuild's claims load in.
const rebuildClaimParts = 4

// copier is what a transaction and a connection offer for COPY.
type copier interface {
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
}

func compareID(a, b booking.ID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type paymentRow struct {
	stream  booking.ID
	state   booking.State
	version uint64
}

// paymentValues are p's values for the columns stream, refs, payment_status, stream_version, updated_at.
func paymentValues(p paymentRow) []any {
	return []any{string(p.stream), nonNil(p.state.PaymentRefs), string(p.state.Payment), int64(p.version), nullTime(p.state.UpdatedAt)}
}

func tsRange(start, end time.Time) any {
	if start.IsZero() {
		return nil
	}
	return pgtype.Range[pgtype.Timestamptz]{
		Lower: pgtype.Timestamptz{Time: micro(start), Valid: true}, Upper: pgtype.Timestamptz{Time: micro(end), Valid: true},
		LowerType: pgtype.Inclusive, UpperType: pgtype.Exclusive, Valid: true,
	}
}

// rowsOf feeds COPY n rows that fill writes into one reused slice: pgx encodes a row before it asks
// for the next, so the table is never held as [][]any (a rebuild's largest allocation otherwise).
func rowsOf(n, width int, fill func(i int, row []any) error) pgx.CopyFromSource {
	row := make([]any, width)
	i := 0
	return pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		if err := fill(i, row); err != nil {
			return nil, err
		}
		i++
		return row, nil
	})
}

var copyBookingColumns = []string{"booking", "provider", "meeting", "resources",
	"during", "status", "booking_status", "holder", "payment_status", "payment_refs", "payment_streams", "capacity",
	"no_show", "scheduled_at", "updated_at", "stream_version", "event_count", "rescheduled_from", "rescheduled_to",
	"cancel_reason", "canceled_by", "cancel_implied", "findings"}

func copyBookings(ctx context.Context, tx copier, table string, rows []projections.Booking) error {
	if len(rows) == 0 {
		return nil
	}
	src := rowsOf(len(rows), len(copyBookingColumns), func(i int, row []any) error { return bookingValues(rows[i], row) })
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{table}, copyBookingColumns, src); err != nil {
		return fmt.Errorf("copy %d calendar rows: %w", len(rows), err)
	}
	return nil
}

func copyClaims(ctx context.Context, tx copier, table string, claims []projections.Claim, holders map[booking.ID]bool, resourceID map[string]int32) error {
	if len(claims) == 0 {
		return nil
	}
	src := rowsOf(len(claims), 7, func(i int, row []any) error {
		c := claims[i]
		copy(row, []any{string(c.Booking), resourceID[c.Resource], c.Resource, c.Meeting, tsRange(c.Start, c.End), c.Priority, holders[c.Booking]})
		return nil
	})
	_, err := tx.CopyFrom(ctx, pgx.Identifier{table}, []string{"booking", "resource_id", "resource", "meeting", "during", "priority_at", "holder"}, src)
	if err != nil {
		var pgErr interface{ SQLState() string }
		if errors.As(err, &pgErr) && pgErr.SQLState() == "23P01" {
			return fmt.Errorf("copy claims: the slot-holder rule produced overlapping holders (a bug): %w", err)
		}
		return fmt.Errorf("copy %d claims: %w", len(claims), err)
	}
	return nil
}

func copyPayments(ctx context.Context, tx copier, table, refsTable string, rows []paymentRow) error {
	if len(rows) == 0 {
		return nil
	}
	src := make([][]any, len(rows))
	var refs [][]any
	for i, p := range rows {
		src[i] = paymentValues(p)
		for _, r := range p.state.PaymentRefs {
			refs = append(refs, []any{r, string(p.stream)})
		}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{table}, []string{"stream", "refs", "payment_status", "stream_version", "updated_at"},
		pgx.CopyFromRows(src))
	if err != nil {
		return fmt.Errorf("copy %d payment streams: %w", len(rows), err)
	}
	if len(refs) == 0 {
		return nil
	}
	slices.SortFunc(refs, byRefKey)
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{refsTable}, []string{"ref", "stream"}, pgx.CopyFromRows(refs)); err != nil {
		return fmt.Errorf("copy payment stream refs: %w", err)
	}
	return nil
}

// byRefKey orders link rows by primary key, so that each key lands on the index's rightmost page.
func byRefKey(a, b []any) int {
	if c := cmp.Compare(a[0].(string), b[0].(string)); c != 0 {
		return c
	}
	return cmp.Compare(a[1].(string), b[1].(string))
}

func copyBookingRefs(ctx context.Context, tx copier, table string, rows []projections.Booking) error {
	var refs [][]any
	for _, b := range rows {
		for _, r := range b.PaymentRefs {
			refs = append(refs, []any{r, string(b.Booking)})
		}
	}
	if len(refs) == 0 {
		return nil
	}
	slices.SortFunc(refs, byRefKey)
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{table}, []string{"ref", "booking"}, pgx.CopyFromRows(refs)); err != nil {
		return fmt.Errorf("copy booking payment refs: %w", err)
	}
	return nil
}

// parallel calls f(0..n-1) on every core.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), max(1, n/64))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				f(i)
			}
		}()
	}
	wg.Wait()
}
