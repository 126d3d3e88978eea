package readmodel

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/domain/booking"
	"bookingledger/projections"
)

// A rebuild replays the log from its start. Writing every batch would rewrite a booking's row and
// claims each time one of its events shows up, and recompute its overlapping set each time. Instead,
// while the checkpoint is at the start and a rebuild is in progress, Apply only decodes into the
// stream cache (complete in that mode: it has seen every event of every stream), and flush computes
// every row once, in memory, with the same functions as the incremental path, then loads them with
// COPY into staging tables and swaps those in, in one transaction together with the checkpoint
// (rebuild_swap.go). A crash before that commit leaves the checkpoint at the start: the next runner
// simply starts the replay again. Past bufferLimit events the flush happens early and the rest of the
// replay continues incrementally.

// flush writes everything buffered. When last, the replay has caught up: the same transaction syncs
// the reconciliation items (from memory, rebuild_items.go) and ends the rebuild. The caller holds m.mu.
func (m *ReadModel) flush(ctx context.Context, last bool) error {
	if !m.buffering {
		return nil
	}
	// The staging tables are PostgreSQL's work and the fold is ours: they overlap.
	type staged struct {
		s   *staging
		err error
	}
	stagedC := make(chan staged, 1)
	go func() {
		s, err := m.createStaging(ctx)
		stagedC <- staged{s, err}
	}()
	type stream struct {
		id      booking.ID
		events  []booking.Event
		version uint64
		state   booking.State
	}
	// Streams are large values: they are gathered once, presized, and sorted by pointer.
	all := make([]stream, 0, m.cache.lru.Len())
	for el := m.cache.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*cacheEntry)
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
	for i, p := range payments {
		payStreams[i] = projections.PaymentStream{Stream: p.id, Refs: p.state.PaymentRefs}
		payEvents[p.id] = p.events
	}
	prows := make([]paymentRow, len(payments))
	for i, p := range payments {
		prows[i] = paymentRow{stream: p.id, state: p.state, version: p.version}
	}
	st := <-stagedC
	if st.err != nil {
		return st.err
	}
	stage := st.s
	// The payment streams depend on nothing computed below: with staging tables they load while
	// the calendar rows and the slot assignment are computed.
	payJob := func(ctx context.Context, c copier, table func(string) string) error {
		return copyPayments(ctx, c, table("payment_streams"), table("payment_stream_refs"), prows)
	}
	var ld *loader
	if stage != nil {
		ld = m.startLoad(ctx, stage)
		ld.add(payJob)
	}
	abort := func(err error) error {
		if ld != nil {
			ld.abort()
			m.dropStagingQuietly(stage)
		}
		return err
	}
	index := projections.NewPaymentIndex(payStreams)
	superseded := map[booking.ID][]booking.ID{}
	for _, b := range bookings {
		if from := b.state.RescheduledFrom; from != "" {
			superseded[from] = append(superseded[from], b.id)
		}
	}

	// The shared inputs are only read from here on, so rows are computed on every core.
	rows := make([]projections.Booking, len(bookings))
	parallel(len(bookings), func(i int) {
		b := bookings[i]
		linked, closure := index.Link(b.state.PaymentRefs)
		var linkedPayments []projections.LinkedPayment
		for _, p := range linked {
			linkedPayments = append(linkedPayments, projections.LinkedPayment{Stream: p, Events: payEvents[p]})
		}
		row := projections.BookingRow(projections.BookingInput{
			Events: b.events, StreamVersion: b.version, Payments: linkedPayments, SupersededBy: superseded[b.id], Folded: &b.state,
		})
		row.Booking, row.PaymentRefs = b.id, closure
		rows[i] = row
	})
	claims := make([]projections.Claim, 0, len(rows))
	for _, row := range rows {
		if row.Claims() {
			for _, r := range row.Resources {
				claims = append(claims, projections.Claim{Booking: row.Booking, Resource: r, Meeting: row.Meeting,
					Start: micro(row.Start), End: micro(row.End), Priority: micro(row.ScheduledAt)})
			}
		}
	}
	asg := assignSlots(claims, runtime.GOMAXPROCS(0))
	var names []string
	seen := map[string]bool{}
	for _, c := range claims {
		if !seen[c.Resource] {
			seen[c.Resource] = true
			names = append(names, c.Resource)
		}
	}
	resourceID, err := m.resourceIDsOf(ctx, names)
	if err != nil {
		return abort(err)
	}
	for i := range rows {
		if rows[i].Claims() {
			rows[i].Assign(asg.Holders[rows[i].Booking])
		}
	}

	jobs := loadJobs(rows, claims, asg.Holders, resourceID)
	if ld != nil {
		for _, j := range jobs {
			ld.add(j)
		}
		if err := ld.wait(); err != nil {
			m.dropStagingQuietly(stage)
			return fmt.Errorf("write rebuilt read model: %w", err)
		}
	} else {
		jobs = append(jobs, payJob)
	}
	err = pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := checkpoint.Advance(ctx, tx, ProjectionName, m.pos, m.bufPos, int(m.buffered)); err != nil {
			return err
		}
		if stage != nil {
			if err := stage.swap(ctx, tx); err != nil {
				return err
			}
		} else {
			// Empty already (the reset did it in the transaction that moved the checkpoint to the
			// start); repeated so that COPY can never meet a row.
			if _, err := tx.Exec(ctx, `TRUNCATE calendar_bookings, calendar_slots, payment_streams, payment_stream_refs, calendar_booking_refs`); err != nil {
				return err
			}
			for _, j := range jobs {
				if err := j(ctx, tx, func(t string) string { return t }); err != nil {
					return err
				}
			}
		}
		if last {
			if err := m.finishRebuild(ctx, tx, rows, asg.Conflicts); err != nil {
				return err
			}
		}
		if m.failAfterApply != nil {
			return m.failAfterApply()
		}
		return nil
	})
	if err != nil {
		if stage != nil {
			m.dropStagingQuietly(stage)
		}
		return fmt.Errorf("write rebuilt read model: %w", err)
	}
	if last {
		m.rebuilding = false
	}
	m.pos, m.buffering, m.buffered = m.bufPos, false, 0
	m.cache.trim()
	return nil
}

// assignSlots is projections.AssignSlots(claims) computed in up to parts groups at once. Claims
// interact only through overlaps on a shared resource, and a booking's claims only together, so the
// groups are the resources joined by bookings that claim several of them: no overlap connects two
// groups, and each group's answer for its bookings is the whole set's (see AssignSlots).
func assignSlots(claims []projections.Claim, parts int) projections.Assignment {
	if parts <= 1 || len(claims) < 1024 {
		return projections.AssignSlots(claims)
	}
	index := map[string]int{}
	var parent []int
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	resource := func(r string) int {
		i, ok := index[r]
		if !ok {
			i = len(parent)
			index[r] = i
			parent = append(parent, i)
		}
		return i
	}
	first := make(map[booking.ID]int, len(claims))
	for _, c := range claims {
		r := resource(c.Resource)
		if o, ok := first[c.Booking]; ok {
			if a, b := find(r), find(o); a != b {
				parent[a] = b
			}
		} else {
			first[c.Booking] = r
		}
	}
	groups := make([][]projections.Claim, parts)
	for _, c := range claims {
		k := find(index[c.Resource]) % parts
		groups[k] = append(groups[k], c)
	}
	asgs := make([]projections.Assignment, parts)
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() { asgs[k] = projections.AssignSlots(groups[k]) })
	}
	wg.Wait()
	out := projections.Assignment{Holders: make(map[booking.ID]bool, len(first))}
	for _, a := range asgs {
		maps.Copy(out.Holders, a.Holders)
		out.Conflicts = append(out.Conflicts, a.Conflicts...)
	}
	slices.SortFunc(out.Conflicts, func(a, b projections.Conflict) int {
		if c := cmp.Compare(a.Booking, b.Booking); c != 0 {
			return c
		}
		return cmp.Compare(a.Holder, b.Holder)
	})
	return out
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
	src := rowsOf(len(rows), len(copyBookingColumns), func(i int, row []any) error {
		b := rows[i]
		r := toRowJSON(b)
		findings := []byte("[]") // what Marshal makes of no findings, without its cost for every row
		if len(r.Findings) > 0 {
			var err error
			if findings, err = json.Marshal(r.Findings); err != nil {
				return fmt.Errorf("encode findings of %s: %w", b.Booking, err)
			}
		}
		copy(row, []any{r.Booking, r.Provider, r.Meeting, r.Resources, tsRange(b.Start, b.End), r.Status, r.BookingStatus, r.Holder,
			r.PaymentStatus, r.PaymentRefs, r.PaymentStreams, r.Capacity, r.NoShow, r.ScheduledAt, r.UpdatedAt, int64(r.StreamVersion),
			r.EventCount, r.RescheduledFrom, r.RescheduledTo, r.CancelReason, r.CanceledBy, r.CancelImplied, string(findings)})
		return nil
	})
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
		src[i] = []any{string(p.stream), nonNil(p.state.PaymentRefs), string(p.state.Payment), int64(p.version), nullTime(p.state.UpdatedAt)}
		for _, r := range p.state.PaymentRefs {
			refs = append(refs, []any{r, string(p.stream)})
		}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{table}, []string{"stream", "refs", "payment_status", "stream_version", "updated_at"},
		pgx.CopyFromRows(src))
	if err != nil {
		return fmt.Errorf("copy %d payment streams: %w", len(rows), err)
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
