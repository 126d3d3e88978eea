package readmodel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/resource"
	"bookingledger/projections/calendar"
)

// A replay from the start of the log (a rebuild) is loaded in bulk: writing every batch would rewrite
// a booking's row and claims each time one of its events shows up, and recompute its overlapping set
// each time. The load keeps no more in memory than one chunk of bookings, whatever the log's size:
//
//  1. Buffer copies each batch's events, undecoded, into the replay's work table — or, when the event
//     store lives in the same database (Options.Log), BufferFrom notes the range of the log to read,
//     and the steps below read the store's events where they lie (ADR 0024's amendment).
//  2. Flush reads the replay back by stream, the link stream first (it is small, and folded in memory
//     for the canonical resources), and folds each booking stream once: a payment stream is written
//     as it is and kept to link bookings to (there are at most as many as paid bookings); a booking
//     gets a key — its first canonical resource, its slot, the booking it was rescheduled from — and
//     the resources a booking claims together are joined into groups. A booking that may be lone —
//     overlapping no other claim, its row depending on its own stream alone — is computed there and
//     then, and staged (lone.go).
//  3. The keys are walked in the order of (group, start): what the fold staged of the bookings that
//     turn out not to be lone is undone, and their keys are what the next step reads.
//  4. It reads those bookings' streams again in the order of (group, start) and cuts them into chunks
//     of whole connected sets: a chunk ends, once it holds RebuildChunk bookings, where no later claim
//     of its group can overlap an earlier one. Each chunk is one calendar.Recompute, whose rows,
//     claims and item changes load into the staging tables while the next chunk is computed.
//  5. The staging tables get their indexes and constraints, one build each. Item changes that need a
//     row of another chunk (an open conflict whose two sides are apart now, or whose booking has no
//     row) are planned then, from the staged rows.
//  6. One transaction swaps the staging tables in with the checkpoint, the item changes and the end
//     of the rebuild (rebuild_swap.go). A crash before it leaves the checkpoint at the start: the next
//     runner starts the replay again.

// replay is a bulk load in progress: its tables, the events taken, and the position of the last;
// logFrom, when BufferFrom took a range of the store's log, is where the range starts (it ends at
// last).
type replay struct {
	stage   *staging
	events  int64
	last    eventlog.Position
	logFrom *eventlog.Position
}

// source is the relation the replay is read back from: its work table, with the range of the
// store's log that BufferFrom took (the table is empty then, but for a runner that mixes the two).
func (rp *replay) source(log LogSource) string {
	table := rp.stage.table("calendar_replay")
	if rp.logFrom == nil {
		return table
	}
	return `(SELECT stream_id, version, event_id, event_type, data, metadata FROM ` + table + `
UNION ALL ` + log.LogRelation(*rp.logFrom, rp.last) + `)`
}

// replayBatch is how many events are decoded at once (on every core) when the replay is read back.
const replayBatch = 4096

// startReplay creates the replay's tables unless a replay is under way. The caller holds m.mu.
func (m *ReadModel) startReplay(ctx context.Context) error {
	if m.replay != nil {
		return nil
	}
	s, err := m.createStaging(ctx)
	if err != nil {
		return err
	}
	m.replay, m.bufLinks = &replay{stage: s, last: m.pos}, resource.Fold(nil)
	return nil
}

// Buffer implements projections.Bulk: it copies a replay's batch into the replay table.
func (m *ReadModel) Buffer(ctx context.Context, events []eventlog.RecordedEvent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.startReplay(ctx); err != nil {
		return err
	}
	events = m.unseen(events)
	if len(events) == 0 {
		return nil
	}
	src := rowsOf(len(events), 6, func(i int, row []any) error {
		e := &events[i]
		copy(row, []any{e.StreamID, int64(e.Version), [16]byte(e.ID), e.Type, e.Data, e.Metadata})
		return nil
	})
	if _, err := m.pool.CopyFrom(ctx, pgx.Identifier{m.replay.stage.table("calendar_replay")},
		[]string{"stream_id", "version", "event_id", "event_type", "data", "metadata"}, src); err != nil {
		return fmt.Errorf("copy %d events into the replay: %w", len(events), err)
	}
	m.replay.events += int64(len(events))
	m.replay.last = events[len(events)-1].Position
	return nil
}

// BufferFrom implements projections.BulkFrom: with Options.Log, the rest of the log as of now is
// taken where it lies: the replay notes its range, which the write reads from the store's table.
func (m *ReadModel) BufferFrom(ctx context.Context, from eventlog.Position) (int64, eventlog.Position, bool, error) {
	if m.opts.Log == nil {
		return 0, from, false, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.startReplay(ctx); err != nil {
		return 0, from, true, err
	}
	if m.replay.last.Compare(from) > 0 { // a runner that starts again from the start of the log
		from = m.replay.last
	}
	n, last, err := m.opts.Log.LogRange(ctx, from)
	if err != nil {
		return 0, from, true, err
	}
	if n > 0 && m.replay.logFrom == nil {
		m.replay.logFrom = &from
	}
	if n == 0 {
		if m.replay.events == 0 {
			// Nothing to replay (a first run over an empty log): as when Buffer is never called,
			// no replay is left behind. A rebuild's Flush starts one of its own.
			m.dropStagingQuietly(m.replay.stage)
			m.replay = nil
		}
		return 0, from, true, nil
	}
	m.replay.events += n
	m.replay.last = last
	return n, last, true, nil
}

// Flush implements projections.Bulk: it writes the replay and ends the rebuild.
func (m *ReadModel) Flush(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.startReplay(ctx); err != nil {
		return err
	}
	rp := m.replay
	m.replay = nil
	err := m.writeReplay(ctx, rp)
	if err != nil {
		m.dropStagingQuietly(rp.stage)
		return fmt.Errorf("write rebuilt read model: %w", err)
	}
	m.pos = rp.last
	m.advance()
	return nil
}

// smallReplay is the largest replay whose staging tables are indexed before they are loaded, unless
// Options.IndexFirstUpTo says otherwise.
//
// An index built over loaded rows records their count as the table's size (pg_class.reltuples):
// after a replay of a few events — a first run whose log holds a fresh deployment's first webhook —
// the swapped-in tables say they hold one row. Every batch connection then makes its generic plans
// (force_generic_plan) for a table of one row and keeps them while the table grows, until autovacuum
// next analyzes it: PostgreSQL picked calendar_slots_pkey, (booking, resource_id), by resource_id
// alone for the connected claims' walk, which then read every claim of the resource for each seed
// (measured: the walk took 71 ms a batch instead of 0.5 ms, and the whole serve's PostgreSQL CPU per
// delivery doubled). An index built over an empty table leaves the size unknown, which PostgreSQL
// plans as at least ten pages, and that plan stays indexed (TestEveryBatchStatementStaysIndexed's
// first-run database). A small replay costs as little either
// way; a large one is indexed after the load, one build per index, and its true size plans well.
const smallReplay = 1000

func (m *ReadModel) writeReplay(ctx context.Context, rp *replay) error {
	s, lap := rp.stage, time.Now()
	src := rp.source(m.opts.Log)
	indexFirst := rp.events <= m.opts.IndexFirstUpTo
	if indexFirst {
		err := m.indexStaging(ctx, s)
		if m.phase(&lap, "index"); err != nil {
			return err
		}
	}
	// Conflict and late-event items are opened by the calendar's runner alone, and the runner that
	// replays holds the projection's lock until its swap (checkpoint.Locker; rebuild refuses to start
	// while a serve holds it): when none exists now, none appears before the swap. Then no chunk asks
	// for its bookings' items — each ask names a chunk's thousands of bookings in an array, which
	// PostgreSQL plans element by element, 3.4 ms for 5,000 (docs/benchmarks-history.md, "Lab notes
	// of 2026-12-07, small hours") — and the fold may compute lone bookings (lone.go).
	var anyItems bool
	if err := m.pool.QueryRow(ctx, `SELECT EXISTS (`+existingItemsSQL+`)`).Scan(&anyItems); err != nil {
		return fmt.Errorf("look for reconciliation items: %w", err)
	}
	var crowd *crowding
	if !anyItems {
		crowd = newCrowding(rp.events)
	}
	payments, err := m.foldReplay(ctx, s, src, crowd)
	if m.phase(&lap, "fold"); err != nil {
		return err
	}
	rest, undone, err := m.sortOutLone(ctx, s)
	if m.phase(&lap, "lone"); err != nil {
		return err
	}
	m.chunked, m.undone = rest, undone
	var apart []calendar.Item
	if rest > 0 {
		apart, err = m.computeReplay(ctx, s, src, payments, anyItems)
	}
	if m.phase(&lap, "compute"); err != nil {
		return err
	}
	if !indexFirst {
		err = m.indexStaging(ctx, s)
		if m.phase(&lap, "index"); err != nil {
			return err
		}
	}
	err = m.closeApart(ctx, s, apart)
	if m.phase(&lap, "items"); err != nil {
		return err
	}
	defer m.phase(&lap, "swap")
	return rebuildTx(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := checkpoint.Advance(ctx, tx, ProjectionName, m.pos, rp.last, int(rp.events)); err != nil {
			return err
		}
		if err := writeLinks(ctx, tx, m.bufLinks); err != nil {
			return err
		}
		opens := s.table("calendar_item_opens")
		var drop, onConflict, build string
		err := tx.QueryRow(ctx, fmt.Sprintf(itemIndexesSQL, opens)).Scan(&drop, &onConflict, &build)
		if err == nil {
			_, err = tx.Exec(ctx, fmt.Sprintf(stagedItemsSQL, opens, fmt.Sprintf(itemTextsSQL, s.table("calendar_item_texts")), drop, onConflict, build))
		}
		if err != nil {
			return fmt.Errorf("sync reconciliation items: %w", err)
		}
		if err := s.install(ctx, tx); err != nil {
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

// phase tells Options.Phases how long the rebuild's phase that ends now took, since *lap.
func (m *ReadModel) phase(lap *time.Time, name string) {
	if m.opts.Phases != nil {
		m.opts.Phases(name, time.Since(*lap))
	}
	*lap = time.Now()
}

// stagedItemsSQL makes the item changes staged by the chunks, as itemWrites does for a batch, past the
// table's indexes or with them dropped and built after (itemIndexesSQL): cheaper for many opens. The
// lock holds its other writers (quarantine, steps, operators) until the commit; the unique index's
// build stands for ON CONFLICT (no other writer opens conflicts or late events).
const stagedItemsSQL = `%[3]s
INSERT INTO reconciliation_items (kind, subject, booking, other_booking, event_id, receipt_id, reason)
SELECT * FROM %[1]s ORDER BY kind, subject %[4]s;
%[2]s;
SET LOCAL maintenance_work_mem = '256MB';
%[5]s`

// itemIndexesSQL drops and builds the indexes of reconciliation_items but its constraints' when the
// staged opens are as many as half its rows (its ids' range: no fewer), else keeps ON CONFLICT.
const itemIndexesSQL = `SELECT coalesce('DROP INDEX ' || string_agg(x.indexrelid::regclass::text, ', ') || ';', ''),
    CASE WHEN count(*) = 0 THEN 'ON CONFLICT (kind, subject) WHERE closed_at IS NULL DO NOTHING' ELSE '' END,
    coalesce(string_agg(pg_get_indexdef(x.indexrelid), ';' || chr(10)), '')
FROM pg_index x WHERE x.indrelid = 'reconciliation_items'::regclass AND NOT EXISTS (SELECT FROM pg_constraint k WHERE k.conindid = x.indexrelid)
  AND (SELECT count(*) * 2 FROM %s) >= (SELECT coalesce(max(id) - min(id) + 1, 0) FROM reconciliation_items)`

// replayed is one stream of the replay read back: decoded, deduplicated and folded.
type replayed struct {
	stream  string
	id      booking.ID
	raw     []eventlog.RecordedEvent
	events  []booking.Event
	version uint64
	state   booking.State
	key     chunkKey
}

// chunkKey is what the computation reads of a booking's key: its group (nil without a slot), its
// slot, and the bookings rescheduled from it.
type chunkKey struct {
	group        *int32
	start, end   *time.Time
	supersededBy []string
}

// bookingKey is what the fold writes of a booking for the computation (calendar_keys): its first
// canonical resource and its slot (none without a slot), and the booking it was rescheduled from.
type bookingKey struct {
	stream     string
	booking    booking.ID
	resource   string
	start, end time.Time
	from       booking.ID
	// computed: the fold computed the booking as a lone one (lone.go).
	computed bool
}

func (k bookingKey) write(w *copyWriter) {
	w.text(k.stream)
	w.text(string(k.booking))
	if k.start.IsZero() {
		w.null()
	} else {
		w.text(k.resource)
	}
	w.nullTimestamptz(k.start)
	w.nullTimestamptz(k.end)
	w.text(string(k.from))
	w.boolean(k.computed)
}

// eachReplayed analyzes tables (the planner knows nothing of fresh work tables) and runs query,
// whose rows are replay rows (with the chunkKey columns after them when keyed) with each stream's
// rows together, and hands f the streams in order, in batches decoded and folded on every core. The
// rows are read while f works on the batch before.
func (m *ReadModel) eachReplayed(ctx context.Context, tables, query string, keyed bool, f func([]replayed) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []replayed, 1)
	read := make(chan error, 1)
	go func() {
		defer close(batches)
		read <- m.readReplay(ctx, tables, query, keyed, cmp.Or(m.replayBatch, replayBatch), batches)
	}()
	for batch := range batches {
		err := m.decodeReplayed(batch)
		if err == nil {
			err = f(batch)
		}
		if err != nil {
			cancel()
			for range batches { // the reader stops and gives its connection back
			}
			return err
		}
	}
	return <-read
}

// readReplay sends the streams of query's rows in batches of about size events.
func (m *ReadModel) readReplay(ctx context.Context, tables, query string, keyed bool, size int, out chan<- []replayed) error {
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return rebuildTx(ctx, conn, func(tx pgx.Tx) error { return sendReplay(ctx, tx, tables, query, keyed, size, out) })
}

func sendReplay(ctx context.Context, tx pgx.Tx, tables, query string, keyed bool, size int, out chan<- []replayed) error {
	if _, err := tx.Exec(ctx, "SET LOCAL default_statistics_target = 10; ANALYZE "+tables); err != nil { // a sample of 3,000 rows
		return fmt.Errorf("analyze the replay: %w", err)
	}
	rows, err := tx.Query(ctx, query)
	if err != nil {
		return fmt.Errorf("read the replay: %w", err)
	}
	defer rows.Close()
	var (
		// A replayed is large (a folded State): the batch is made at its size once, not grown.
		batch = make([]replayed, 0, size)
		n     int
		types = map[string]string{}
	)
	send := func() error {
		select {
		case out <- batch:
			batch, n = make([]replayed, 0, size), 0
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for rows.Next() {
		var (
			rec     eventlog.RecordedEvent
			version int64
			typ     pgtype.DriverBytes
			k       chunkKey
		)
		dest := append(make([]any, 0, 10), &rec.StreamID, &version, (*[16]byte)(&rec.ID), &typ, &rec.Data, &rec.Metadata)
		if keyed {
			dest = append(dest, &k.group, &k.start, &k.end, &k.supersededBy)
		}
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("read the replay: %w", err)
		}
		if rec.Type = types[string(typ)]; rec.Type == "" {
			rec.Type = string(typ)
			types[rec.Type] = rec.Type
		}
		rec.Version = uint64(version)
		if len(batch) == 0 || batch[len(batch)-1].stream != rec.StreamID {
			if n >= size {
				if err := send(); err != nil {
					return err
				}
			}
			batch = append(batch, replayed{stream: rec.StreamID, key: k})
		}
		batch[len(batch)-1].raw = append(batch[len(batch)-1].raw, rec)
		n++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the replay: %w", err)
	}
	if len(batch) == 0 {
		return nil
	}
	return send()
}

func (m *ReadModel) decodeReplayed(batch []replayed) error {
	errs := make([]error, len(batch))
	calendar.Parallel(len(batch), func(i int) {
		st := &batch[i]
		var ok bool
		if st.id, ok = booking.FromStream(st.stream); !ok {
			return // the link stream, or another that is not the calendar's: left as read
		}
		e := cacheEntry{stream: st.stream}
		for _, rec := range st.raw {
			ev, err := m.codec.Decode(rec)
			if err != nil {
				errs[i] = fmt.Errorf("decode %s@%d: %w", rec.StreamID, rec.Version, err)
				return
			}
			e.add(rec.Version, ev)
		}
		st.raw, st.events, st.version = nil, e.events, e.version
		st.state = booking.Fold(st.events)
	})
	return errors.Join(errs...)
}

// rebuildTx runs f in a transaction set for the rebuild's large statements. The planner's JIT would
// compile the replay's reads and the item queries for longer than they run (4.9 s of CPU for the
// chunks' read of a 50,000-event rebuild that took 5.5 s), and the default work_mem sorts the
// replay on disk.
func rebuildTx(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, f func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL jit = off; SET LOCAL work_mem = '64MB'`); err != nil {
			return fmt.Errorf("set up the rebuild's transaction: %w", err)
		}
		return f(tx)
	})
}

// paymentsOf are the replay's payment streams, to link bookings to, and what else a chunk needs of
// bookings outside it: the cancels of all remaining occurrences of a series, by series (few: one per
// series canceled so), since a series' occurrences fall in different chunks.
type paymentsOf struct {
	index  *calendar.PaymentIndex
	events map[booking.ID][]booking.Event
	series map[string][]calendar.SeriesCancel
}

// keyBatch is how many booking keys one COPY writes.
const keyBatch = 20_000

// foldReplay is step 2: it folds every stream of the replay (read from src), writes the payment
// streams and every booking's key, numbers the resource groups and, unless crowd is nil, computes the
// bookings that may be lone (those crowd does not leave to the chunks).
func (m *ReadModel) foldReplay(ctx context.Context, s *staging, src string, crowd *crowding) (paymentsOf, error) {
	ld := m.startLoad(ctx)
	var (
		streams []calendar.PaymentStream
		events  = map[booking.ID][]booking.Event{}
		rows    []paymentRow
		keys    = make([]bookingKey, 0, keyBatch)
		groups  calendar.ResourceGroups
		series  = map[string][]calendar.SeriesCancel{}
	)
	copyKeys := func() {
		batch := keys
		keys = make([]bookingKey, 0, keyBatch)
		ld.add(func(ctx context.Context, c pgx.Tx) error {
			_, err := copyRows(ctx, c, s.table("calendar_keys"), []string{"stream", "booking", "resource", "lower", "upper", "rescheduled_from", "computed"},
				len(batch), func(i int, w *copyWriter) error { batch[i].write(w); return nil })
			return err
		})
	}
	work := newAhead(computeAhead)
	err := m.eachReplayed(ctx, s.table("calendar_replay")+" (stream_id)", fmt.Sprintf(foldSQL, src), false, func(batch []replayed) error {
		var candidates []*replayed // of this batch: a replayed is large, and is not copied
		for i := range batch {
			st := &batch[i]
			if st.stream == resource.Stream {
				if err := m.foldLinks(st.raw); err != nil {
					return err
				}
				continue
			}
			if st.id == "" {
				continue
			}
			if calendar.IsPaymentOnly(st.events) {
				streams = append(streams, calendar.PaymentStream{Stream: st.id, Refs: st.state.PaymentRefs})
				events[st.id] = st.events
				rows = append(rows, paymentRow{stream: st.id, state: st.state, version: st.version})
				continue
			}
			if sc, ok := calendar.SeriesCancelOf(st.id, st.state); ok {
				series[sc.Series] = append(series[sc.Series], sc)
			}
			key := bookingKey{stream: st.stream, booking: st.id, from: st.state.RescheduledFrom}
			if st.state.HasSlot() {
				res := calendar.CanonicalResources(st.state.Slot.Resources, m.bufLinks.Canonical)
				groups.Join(res...)
				key.resource, key.start, key.end = res[0], st.state.Slot.Start, st.state.Slot.End
				if crowd != nil && crowd.skip(res, key.start, key.end) {
					keys = append(keys, key) // not computed: the chunks compute it
					continue
				}
			}
			if key.computed = crowd != nil && mayBeLone(st.state); key.computed {
				candidates = append(candidates, st)
			}
			keys = append(keys, key)
		}
		if len(candidates) > 0 {
			if err := work.start(func() error { return m.computeLone(ctx, s, ld, candidates) }); err != nil {
				return err
			}
		}
		if len(keys) >= keyBatch {
			copyKeys()
		}
		return nil
	})
	if err = cmp.Or(work.wait(), err); err != nil {
		ld.abort()
		return paymentsOf{}, err
	}
	copyKeys()
	ld.add(func(ctx context.Context, c pgx.Tx) error {
		return copyPayments(ctx, c, s.table("payment_streams"), s.table("payment_stream_refs"), rows)
	})
	ld.add(func(ctx context.Context, c pgx.Tx) error {
		res := groups.Resources()
		_, err := copyRows(ctx, c, s.table("calendar_groups"), []string{"resource", "grp"}, len(res),
			func(i int, w *copyWriter) error { w.text(res[i]); w.int4(groups.Group(res[i])); return nil })
		return err
	})
	if err := ld.wait(); err != nil {
		return paymentsOf{}, fmt.Errorf("write booking keys: %w", err)
	}
	return paymentsOf{index: calendar.NewPaymentIndex(streams), events: events, series: series}, nil
}

// foldSQL reads the replay back by stream, the link stream first: the canonical resources it folds to
// are known before any booking's key is. Streams are ordered bytewise (COLLATE "C"), as chunkSQL's
// are: the reads need each stream's rows together, not the database's collation, whose comparisons
// (strcoll, no abbreviated keys) made the sort of 1,000,000 events cost PostgreSQL 4.5–5.2 CPU-s
// against 3.6–4.0 (docs/benchmarks-history.md, "The rebuild's sorts in byte order").
const foldSQL = `SELECT stream_id, version, event_id, event_type, data, metadata FROM %s r
ORDER BY stream_id <> '` + resource.Stream + `', stream_id COLLATE "C"`

// foldLinks folds the link stream's events into the replay's links, in stream order.
func (m *ReadModel) foldLinks(raw []eventlog.RecordedEvent) error {
	slices.SortFunc(raw, func(a, b eventlog.RecordedEvent) int { return cmp.Compare(a.Version, b.Version) })
	for _, rec := range raw {
		ev, err := m.decodeLink(rec)
		if err != nil {
			return err
		}
		m.bufLinks.Evolve(ev)
	}
	return nil
}

// chunkSQL reads the streams of the bookings the fold left to the chunks (calendar_rest, lone.go)
// back in the order chunks are cut in, each with its key: group, slot and the bookings rescheduled
// from it. Bookings without a slot come last.
const chunkSQL = `SELECT e.stream_id, e.version, e.event_id, e.event_type, e.data, e.metadata, x.grp, x.lower, x.upper, x.by
FROM %[1]s e JOIN %[2]s x ON x.stream = e.stream_id
ORDER BY x.grp, x.lower, e.stream_id COLLATE "C"`

// computeAhead is how many chunks are computed at once while the replay is read and decoded on: a
// chunk's computation runs on one core for most of its time.
const computeAhead = 2

// computeReplay is step 4: it computes the rest of the calendar chunk by chunk into the staging tables
// and returns the open conflict items whose two sides are in different chunks. Chunks are whole connected
// sets, so they are computed at once (computeAhead) in any order; which chunk's items come first
// changes nothing, as Recompute's answer does not depend on the order of what it is given.
func (m *ReadModel) computeReplay(ctx context.Context, s *staging, src string, payments paymentsOf, anyItems bool) ([]calendar.Item, error) {
	ld := m.startLoad(ctx)
	var (
		chunk []*replayed // into the batches read: a replayed is large, and is not copied
		walk  overlapWalk
		mu    sync.Mutex // apart
		apart []calendar.Item
		work  = newAhead(computeAhead)
	)
	run := func() error {
		c := chunk
		chunk = nil
		return work.start(func() error {
			a, err := m.computeChunk(ctx, s, ld, payments, c, anyItems)
			mu.Lock()
			defer mu.Unlock()
			apart = append(apart, a...)
			return err
		})
	}
	query := fmt.Sprintf(chunkSQL, src, s.table("calendar_rest"))
	err := m.eachReplayed(ctx, s.table("calendar_rest"), query, true, func(batch []replayed) error {
		for i := range batch {
			st := &batch[i]
			if connected := walk.next(st.key); len(chunk) >= m.opts.RebuildChunk && !connected {
				if err := run(); err != nil {
					return err
				}
			}
			chunk = append(chunk, st)
		}
		return nil
	})
	if err == nil && len(chunk) > 0 {
		err = run()
	}
	if err = cmp.Or(work.wait(), err); err != nil {
		ld.abort()
		return nil, err
	}
	return apart, ld.wait()
}

// ahead runs work beside a loop that reads on, at most n at once, and keeps the first failure.
type ahead struct {
	slots chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	err   error
}

func newAhead(n int) *ahead { return &ahead{slots: make(chan struct{}, n)} }

// start runs f once fewer than n run, unless one has failed: then it returns that failure.
func (a *ahead) start(f func() error) error {
	a.slots <- struct{}{}
	if err := a.failed(); err != nil {
		<-a.slots
		return err
	}
	a.wg.Go(func() {
		defer func() { <-a.slots }()
		if err := f(); err != nil {
			a.mu.Lock()
			a.err = cmp.Or(a.err, err)
			a.mu.Unlock()
		}
	})
	return nil
}

func (a *ahead) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// wait returns once everything started has ended, with the first failure.
func (a *ahead) wait() error {
	a.wg.Wait()
	return a.failed()
}

// computeChunk recomputes a chunk's bookings with the items that concern them, and queues their
// writes. It returns the open conflict items of its bookings whose other side is in another chunk.
func (m *ReadModel) computeChunk(ctx context.Context, s *staging, ld *loader, payments paymentsOf, chunk []*replayed, anyItems bool) ([]calendar.Item, error) {
	ids := make([]string, len(chunk))
	in := make(map[booking.ID]bool, len(chunk))
	inputs := make([]calendar.BookingInput, len(chunk))
	var stored []calendar.Booking
	var seriesCancels []calendar.SeriesCancel
	seriesSeen := map[string]bool{}
	for i, st := range chunk {
		ids[i], in[st.id] = string(st.id), true
		inputs[i] = payments.input(st)
		// Bookings rescheduled from this one, wherever they are: they supersede it.
		for _, by := range st.key.supersededBy {
			stored = append(stored, calendar.Booking{Booking: booking.ID(by), RescheduledFrom: st.id})
		}
		// The series cancels of its series, wherever their bookings are (Recompute ignores those of
		// the chunk's own bookings: it has their folds).
		if s := st.state.Series; s != "" && !seriesSeen[s] {
			seriesSeen[s] = true
			seriesCancels = append(seriesCancels, payments.series[s]...)
		}
	}
	var items []calendar.Item
	if anyItems {
		// Simple protocol: a prepared statement's generic plan for thousands of ids scans the table.
		var err error
		if items, err = queryItems(ctx, m.pool, chunkItemsSQL, pgx.QueryExecModeSimpleProtocol, ids); err != nil {
			return nil, fmt.Errorf("items of a chunk: %w", err)
		}
	}
	var own, apart []calendar.Item
	for _, it := range items {
		if it.Kind != calendar.ItemConflict || it.OtherBooking == "" || in[it.OtherBooking] {
			own = append(own, it)
		} else if it.Open() {
			apart = append(apart, it)
		}
	}
	ch := calendar.Recompute(calendar.Component{Bookings: inputs, Stored: stored, Canonical: m.bufLinks.Canonical, Items: own,
		SeriesCancels: seriesCancels})
	return apart, m.stageChanges(ctx, s, ld, ch, false)
}

// input is what Recompute needs of a folded booking stream, with its linked payments.
func (p paymentsOf) input(st *replayed) calendar.BookingInput {
	linked, closure := p.index.Link(st.state.PaymentRefs)
	var lp []calendar.LinkedPayment
	for _, id := range linked {
		lp = append(lp, calendar.LinkedPayment{Stream: id, Events: p.events[id]})
	}
	return calendar.BookingInput{Booking: st.id, Events: st.events, StreamVersion: st.version,
		Payments: lp, PaymentRefs: nonNil(closure), Folded: &st.state}
}

// stageChanges queues the load of a recomputation's rows, claims and item changes; lone puts the
// claims that load guarded into calendar_lone_slots instead (lone.go).
func (m *ReadModel) stageChanges(ctx context.Context, s *staging, ld *loader, ch calendar.Changes, lone bool) error {
	var names []string
	for _, c := range ch.Claims {
		if !slices.Contains(names, c.Resource) {
			names = append(names, c.Resource)
		}
	}
	resourceID, err := m.resourceIDsOf(ctx, names)
	if err != nil {
		return err
	}
	ld.add(func(ctx context.Context, c pgx.Tx) error {
		if err := copyBookings(ctx, c, s.table("calendar_bookings"), ch.Rows); err != nil {
			return err
		}
		return copyBookingRefs(ctx, c, s.table("calendar_booking_refs"), ch.Rows)
	})
	claims, guarded := ch.Claims, []calendar.Claim(nil)
	if lone {
		claims = make([]calendar.Claim, 0, len(ch.Claims))
		for _, c := range ch.Claims {
			if c.End.Before(s.horizon) {
				claims = append(claims, c)
			} else {
				guarded = append(guarded, c)
			}
		}
	}
	ld.add(func(ctx context.Context, c pgx.Tx) error {
		if err := copyClaims(ctx, c, s.table("calendar_slots"), claims, ch.Holders, resourceID, s.horizon); err != nil {
			return err
		}
		if err := copyClaims(ctx, c, s.table("calendar_lone_slots"), guarded, ch.Holders, resourceID, s.horizon); err != nil {
			return err
		}
		return stageItems(ctx, c, s, ch.Items)
	})
	return nil
}

// chunkItemsSQL returns the items of existingItemsSQL of bookings $1: the chunk of an item's booking
// plans it.
const chunkItemsSQL = existingItemsSQL + ` AND booking = ANY($1)`

// goneItemsSQL returns the open items of bookings the rebuilt calendar has no row of.
const goneItemsSQL = `SELECT ` + itemColumns + ` FROM reconciliation_items i
WHERE closed_at IS NULL AND kind IN ('conflict', 'late_event')
  AND NOT EXISTS (SELECT 1 FROM %s b WHERE b.booking = i.booking)`

// closeApart plans, from the staged rows, the items no chunk could: open conflicts whose sides are
// in different chunks now, and open items of bookings without a row. The calendar calls for none of
// them, so they close, with the notes the rows give.
func (m *ReadModel) closeApart(ctx context.Context, s *staging, apart []calendar.Item) error {
	items := apart
	err := rebuildTx(ctx, m.pool, func(tx pgx.Tx) error {
		gone, err := queryItems(ctx, tx, fmt.Sprintf(goneItemsSQL, s.table("calendar_bookings")))
		items = append(items, gone...)
		return err
	})
	if err != nil {
		return fmt.Errorf("items without a row: %w", err)
	}
	var names []string
	for _, it := range items {
		names = append(names, string(it.Booking), string(it.OtherBooking)) // "" finds no row
	}
	rows, err := loadBookingsFrom(ctx, m.pool, s.table("calendar_bookings"), names)
	if err != nil {
		return err
	}
	ch := calendar.Recompute(calendar.Component{Stored: slices.Collect(maps.Values(rows)), Items: items})
	return pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error { return stageItems(ctx, tx, s, ch.Items) })
}

// stageItems copies a chunk's item changes into the work tables the swap applies them from.
func stageItems(ctx context.Context, c pgx.Tx, s *staging, ch calendar.ItemChanges) error {
	if _, err := c.Exec(ctx, `INSERT INTO `+s.table("calendar_item_opens")+unnestItemsSQL, itemArgs(ch.Open)...); err != nil {
		return fmt.Errorf("stage %d new items: %w", len(ch.Open), err)
	}
	if _, err := c.Exec(ctx, `INSERT INTO `+s.table("calendar_item_texts")+` SELECT * FROM `+unnestTextsSQL, textArgs(ch)...); err != nil {
		return fmt.Errorf("stage item texts: %w", err)
	}
	return nil
}

// copier is what a transaction and a connection offer for COPY.
type paymentRow struct {
	stream  booking.ID
	state   booking.State
	version uint64
}

// paymentColumns are the columns writePayment writes.
var paymentColumns = []string{"stream", "refs", "payment_status", "stream_version", "updated_at"}

func writePayment(p paymentRow, w rowWriter) {
	w.text(string(p.stream))
	w.texts(nonNil(p.state.PaymentRefs))
	w.text(string(p.state.Payment))
	w.int8(int64(p.version))
	w.nullTimestamptz(p.state.UpdatedAt)
}

// paymentValues are p's values for paymentColumns, as a statement's parameters.
func paymentValues(p paymentRow) []any {
	var c columnValues
	writePayment(p, &c)
	return c.row
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
	"cancel_reason", "canceled_by", "cancel_implied", "findings", "series", "seats", "seats_left"}

func copyBookings(ctx context.Context, tx pgx.Tx, table string, rows []calendar.Booking) error {
	if len(rows) == 0 {
		return nil
	}
	if _, err := copyRows(ctx, tx, table, copyBookingColumns, len(rows), func(i int, w *copyWriter) error { return writeBooking(rows[i], w) }); err != nil {
		return fmt.Errorf("copy %d calendar rows: %w", len(rows), err)
	}
	return nil
}

// copyClaims copies claims into table; those whose slot ended before horizon go in unguarded: they
// keep their holder flag, which the slot-holder rule computed, but stay out of the double-booking
// guard's GiST (guard.go).
func copyClaims(ctx context.Context, tx pgx.Tx, table string, claims []calendar.Claim, holders map[booking.ID]bool, resourceID map[string]int32,
	horizon time.Time) error {
	if len(claims) == 0 {
		return nil
	}
	_, err := copyRows(ctx, tx, table, []string{"booking", "resource_id", "resource", "meeting", "during", "priority_at", "holder", "guarded"}, len(claims),
		func(i int, w *copyWriter) error {
			c := claims[i]
			w.text(string(c.Booking))
			w.int4(int(resourceID[c.Resource]))
			w.text(c.Resource)
			w.text(c.Meeting)
			w.during(c.Start, c.End)
			w.timestamptz(c.Priority)
			w.boolean(holders[c.Booking])
			w.boolean(!c.End.Before(horizon))
			return nil
		})
	if err != nil {
		return fmt.Errorf("copy %d claims: %w", len(claims), guardErr(err))
	}
	return nil
}

// guardErr says what a violation of the staging claims table's guard (planIndexes) means.
func guardErr(err error) error {
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) && pgErr.SQLState() == "23P01" {
		return fmt.Errorf("the slot-holder rule produced overlapping holders (a bug): %w", err)
	}
	return err
}

func copyPayments(ctx context.Context, tx pgx.Tx, table, refsTable string, rows []paymentRow) error {
	if len(rows) == 0 {
		return nil
	}
	var refs []refRow
	for _, p := range rows {
		refs = refRows(refs, string(p.stream), p.state.PaymentRefs)
	}
	_, err := copyRows(ctx, tx, table, paymentColumns, len(rows), func(i int, w *copyWriter) error { writePayment(rows[i], w); return nil })
	if err != nil {
		return fmt.Errorf("copy %d payment streams: %w", len(rows), err)
	}
	return copyRefs(ctx, tx, refsTable, "stream", refs)
}

// refRow links a payment reference to a booking or payment stream.
type refRow struct{ ref, of string }

func refRows(refs []refRow, of string, payment []string) []refRow {
	for _, r := range payment {
		refs = append(refs, refRow{r, of})
	}
	return refs
}

// copyRefs copies link rows (ref, column) ordered by primary key, so that each key lands on the
// index's rightmost page.
func copyRefs(ctx context.Context, tx pgx.Tx, table, column string, refs []refRow) error {
	if len(refs) == 0 {
		return nil
	}
	slices.SortFunc(refs, func(a, b refRow) int { return cmp.Or(cmp.Compare(a.ref, b.ref), cmp.Compare(a.of, b.of)) })
	write := func(i int, w *copyWriter) error { w.text(refs[i].ref); w.text(refs[i].of); return nil }
	if _, err := copyRows(ctx, tx, table, []string{"ref", column}, len(refs), write); err != nil {
		return fmt.Errorf("copy %s: %w", table, err)
	}
	return nil
}

func copyBookingRefs(ctx context.Context, tx pgx.Tx, table string, rows []calendar.Booking) error {
	var refs []refRow
	for _, b := range rows {
		refs = refRows(refs, string(b.Booking), b.PaymentRefs)
	}
	return copyRefs(ctx, tx, table, "booking", refs)
}
