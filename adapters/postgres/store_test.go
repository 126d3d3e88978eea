package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/domain/eventlog"
)

func TestAppendErrors(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)

	// A stream at version 2 and one event stored in another stream.
	stream := streamName(t)
	stored := events(t, 2)
	_, err := s.Append(ctx, stream, eventlog.NoStream(), stored)
	require.NoError(t, err)
	elsewhere := event(t, "booking.canceled.v1")
	_, err = s.Append(ctx, streamName(t), eventlog.Any(), []eventlog.EventData{elsewhere})
	require.NoError(t, err)

	tests := []struct {
		name     string
		stream   string
		expected eventlog.ExpectedVersion
		events   []eventlog.EventData
		want     error
		wantMsg  string
	}{
		{"no stream on existing", stream, eventlog.NoStream(), events(t, 1), eventlog.ErrVersionConflict, "at version 2, expected no-stream"},
		{"exact too low", stream, eventlog.Exact(1), events(t, 1), eventlog.ErrVersionConflict, "at version 2, expected exact(1)"},
		{"exact too high", stream, eventlog.Exact(3), events(t, 1), eventlog.ErrVersionConflict, "at version 2, expected exact(3)"},
		{"exact zero on existing", stream, eventlog.Exact(0), events(t, 1), eventlog.ErrVersionConflict, "at version 2, expected exact(0)"},
		{"stream exists on missing", streamName(t), eventlog.StreamExists(), events(t, 1), eventlog.ErrVersionConflict, "at version 0, expected stream-exists"},
		{"exact on missing", streamName(t), eventlog.Exact(4), events(t, 1), eventlog.ErrVersionConflict, "at version 0, expected exact(4)"},
		{"some stored", stream, eventlog.Any(), []eventlog.EventData{stored[1], event(t, "x.v1")}, eventlog.ErrPartialDuplicate, "1 of 2 event IDs"},
		{"some stored, stale expectation", stream, eventlog.Exact(1), []eventlog.EventData{stored[1], event(t, "x.v1")}, eventlog.ErrPartialDuplicate, "1 of 2 event IDs"},
		{"stored in another order", stream, eventlog.Any(), []eventlog.EventData{stored[1], stored[0]}, eventlog.ErrPartialDuplicate, "2 of 2 event IDs"},
		{"stored in another stream", streamName(t), eventlog.Any(), []eventlog.EventData{elsewhere}, eventlog.ErrPartialDuplicate, "1 of 1 event IDs"},
		{"stored in another stream, this one exists", stream, eventlog.Any(), []eventlog.EventData{elsewhere}, eventlog.ErrPartialDuplicate, "1 of 1 event IDs"},
		{"no events", stream, eventlog.Any(), nil, eventlog.ErrInvalidAppend, "no events"},
		{"empty stream name", "", eventlog.Any(), events(t, 1), eventlog.ErrInvalidAppend, "empty stream"},
		{"zero event ID", stream, eventlog.Any(), []eventlog.EventData{{Type: "x.v1"}}, eventlog.ErrInvalidAppend, "no ID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, err := s.ReadStream(ctx, stream)
			require.NoError(t, err)
			_, err = s.Append(ctx, tc.stream, tc.expected, tc.events)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.wantMsg)
			after, err := s.ReadStream(ctx, stream)
			require.NoError(t, err)
			assert.Equal(t, before, after, "a failed append must not change the stream")
		})
	}
}

func TestAppendRejectedAppendLeavesNoStreamRow(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	stream := streamName(t)
	_, err := s.Append(ctx, stream, eventlog.StreamExists(), events(t, 1))
	require.ErrorIs(t, err, eventlog.ErrVersionConflict)
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM streams WHERE stream_id = $1`, stream))
}

// TestTranslate covers the SQLSTATEs the adapter maps, including the unique-violation safety net that
// bl_append's checks make unreachable through Append.
func TestTranslate(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	stream := streamName(t)
	e := event(t, "booking.scheduled.v1")
	_, err := s.Append(ctx, stream, eventlog.NoStream(), []eventlog.EventData{e})
	require.NoError(t, err)

	t.Run("unique event_id", func(t *testing.T) {
		_, err := pool.Exec(ctx, `INSERT INTO events (stream_id, version, event_id, event_type) VALUES ($1, 9, $2, 'x.v1')`,
			streamName(t), e.ID.String())
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "23505", pgErr.Code)
		assert.ErrorIs(t, postgres.Translate(err), eventlog.ErrPartialDuplicate)
	})
	t.Run("unique stream version", func(t *testing.T) {
		_, err := pool.Exec(ctx, `INSERT INTO events (stream_id, version, event_id, event_type) VALUES ($1, 1, gen_random_uuid(), 'x.v1')`, stream)
		assert.ErrorIs(t, postgres.Translate(err), eventlog.ErrVersionConflict)
	})
	t.Run("malformed call of bl_append", func(t *testing.T) {
		_, err := pool.Exec(ctx, `SELECT * FROM bl_append($1, 'any', 0, ARRAY[gen_random_uuid()], ARRAY['a', 'b'], ARRAY[NULL::bytea], ARRAY[NULL::bytea])`, stream)
		assert.ErrorIs(t, postgres.Translate(err), eventlog.ErrInvalidAppend)
		_, err = pool.Exec(ctx, `SELECT * FROM bl_append($1, 'sometimes', 0, ARRAY[gen_random_uuid()], ARRAY['a'], ARRAY[NULL::bytea], ARRAY[NULL::bytea])`, stream)
		assert.ErrorIs(t, postgres.Translate(err), eventlog.ErrInvalidAppend)
	})
	for _, code := range []string{"57P01", "57P02", "57P03", "08006", "08001", "53300"} {
		t.Run("unavailable "+code, func(t *testing.T) {
			err := fmt.Errorf("query: %w", &pgconn.PgError{Code: code, Message: "server going away"})
			assert.ErrorIs(t, postgres.Translate(err), eventlog.ErrUnavailable)
		})
	}
	t.Run("other server errors pass through", func(t *testing.T) {
		_, err := pool.Exec(ctx, `SELECT 1/0`)
		got := postgres.Translate(err)
		for _, sentinel := range []error{eventlog.ErrUnavailable, eventlog.ErrVersionConflict, eventlog.ErrPartialDuplicate, eventlog.ErrInvalidAppend} {
			assert.NotErrorIs(t, got, sentinel)
		}
		assert.Equal(t, err, got)
	})
}

// TestUnreachableServerIsUnavailable needs no database: nothing listens on port 1.
func TestUnreachableServerIsUnavailable(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := postgres.NewStore(pool)
	ctx := testCtx(t)

	_, err = s.Append(ctx, "booking-x", eventlog.Any(), events(t, 1))
	assert.ErrorIs(t, err, eventlog.ErrUnavailable)
	_, err = s.ReadStream(ctx, "booking-x")
	assert.ErrorIs(t, err, eventlog.ErrUnavailable)
	_, err = s.ReadAll(ctx, eventlog.Position{}, 10)
	assert.ErrorIs(t, err, eventlog.ErrUnavailable)
}

// A server that accepts the connection but does not answer before connect_timeout is unavailable
// too: the timeout ended the connecting, not the caller's context.
func TestSilentServerIsUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn // held open, never answered
	)
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@"+ln.Addr().String()+"/none?sslmode=disable&connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = postgres.NewStore(pool).Append(testCtx(t), "booking-x", eventlog.Any(), events(t, 1))
	assert.ErrorIs(t, err, eventlog.ErrUnavailable)
}

func TestDataRoundTripsExactly(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	big := bytes.Repeat([]byte{0x00, 0xff, 0x7f, 0x80}, 256*1024) // 1 MiB, incompressible enough to TOAST

	tests := []struct {
		name           string
		data, metadata []byte
	}{
		{"nil", nil, nil},
		{"empty, not nil", []byte{}, []byte{}},
		{"JSON kept byte for byte", []byte(`{ "b":1,  "a" : [1.50, "\u00e9"] }` + "\n"), []byte(`{"k":"v"}`)},
		{"not UTF-8, NUL bytes", []byte{0x00, 0xc3, 0x28, 0xff, 0xfe, 0x00}, []byte{0x80}},
		{"large", big, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stream := streamName(t)
			e := eventlog.EventData{ID: newID(t), Type: "booking.scheduled.v1", Data: tc.data, Metadata: tc.metadata}
			res, err := s.Append(ctx, stream, eventlog.NoStream(), []eventlog.EventData{e})
			require.NoError(t, err)

			got, err := s.ReadStream(ctx, stream)
			require.NoError(t, err)
			require.Len(t, got, 1)
			assertSameBytes(t, tc.data, got[0].Data)
			assertSameBytes(t, tc.metadata, got[0].Metadata)

			all := readAllEventually(t, s, eventlog.Position{Commit: res.Position.Commit, Prepare: res.Position.Prepare - 1}, 1)
			require.Len(t, all, 1)
			assert.Equal(t, e.ID, all[0].ID)
			assertSameBytes(t, tc.data, all[0].Data)
			assertSameBytes(t, tc.metadata, all[0].Metadata)
		})
	}
}

// assertSameBytes also tells nil from empty: both are valid payloads and must come back as written.
func assertSameBytes(t *testing.T, want, got []byte) {
	t.Helper()
	assert.True(t, bytes.Equal(want, got), "bytes differ: want %d bytes, got %d", len(want), len(got))
	assert.Equal(t, want == nil, got == nil, "nil-ness differs: want nil=%v, got nil=%v", want == nil, got == nil)
}

func TestMultiEventAppendOrder(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	stream := streamName(t)
	_, err := s.Append(ctx, stream, eventlog.NoStream(), events(t, 1))
	require.NoError(t, err)
	evs := events(t, 5)
	res, err := s.Append(ctx, stream, eventlog.Exact(1), evs)
	require.NoError(t, err)
	assert.Equal(t, eventlog.AppendResult{FirstVersion: 2, LastVersion: 6, Position: res.Position}, res)

	got, err := s.ReadStream(ctx, stream)
	require.NoError(t, err)
	require.Len(t, got, 6)
	for i, e := range evs {
		r := got[i+1]
		assert.Equal(t, e.ID, r.ID)
		assert.Equal(t, uint64(i+2), r.Version)
		assert.Equal(t, res.Position.Commit, r.Position.Commit, "one append is one transaction")
		assert.Equal(t, 1, r.Position.Compare(got[i].Position), "global order follows versions")
	}
	assert.Equal(t, res.Position, got[5].Position, "the result names the last event's position")

	dup, err := s.Append(ctx, stream, eventlog.NoStream(), evs[:3])
	require.NoError(t, err)
	assert.Equal(t, eventlog.AppendResult{FirstVersion: 2, LastVersion: 4, Position: got[3].Position, Duplicate: true}, dup,
		"a prefix of an earlier append is its duplicate, with its original versions")
	var version uint64
	after, err := s.ReadStream(ctx, stream)
	require.NoError(t, err)
	version = after[len(after)-1].Version
	_, err = s.Append(ctx, stream, eventlog.Exact(version), events(t, 1))
	assert.NoError(t, err, "a duplicate gives back the versions it claimed")
}

// TestReadAllWaitsForOlderTransactions is the case a plain identity column gets wrong: transaction A
// takes a global position, transaction B takes a later one and commits first. A reader that returned
// B would move past A's position and never return A. ReadAll must hold B back until A ends.
func TestReadAllWaitsForOlderTransactions(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"commit", "rollback"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			s, pool := newStore(t)
			ctx := testCtx(t)
			streamA, streamB := streamName(t), streamName(t)
			seed, err := s.Append(ctx, streamName(t), eventlog.NoStream(), events(t, 1))
			require.NoError(t, err)

			txA, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = txA.Rollback(ctx) }()
			evA := event(t, "a.v1")
			var posA int64
			require.NoError(t, txA.QueryRow(ctx, `SELECT global_position FROM bl_append($1, 'no_stream', 0, $2, $3, $4, $5)`,
				streamA, [][16]byte{evA.ID}, []string{evA.Type}, [][]byte{evA.Data}, [][]byte{evA.Metadata}).Scan(&posA))

			resB, err := s.Append(ctx, streamB, eventlog.NoStream(), events(t, 1))
			require.NoError(t, err)
			require.Greater(t, resB.Position.Prepare, uint64(posA), "B's identity value is after A's")
			visibleB := count(t, pool, `SELECT count(*) FROM events WHERE stream_id = $1`, streamB)
			require.Equal(t, 1, visibleB, "B is committed and visible to plain reads")

			got, err := s.ReadAll(ctx, seed.Position, 100)
			require.NoError(t, err)
			assert.Empty(t, got, "nothing after the seed may be returned while A is open")

			if end == "commit" {
				require.NoError(t, txA.Commit(ctx))
			} else {
				require.NoError(t, txA.Rollback(ctx))
			}
			want := 2
			if end == "rollback" {
				want = 1
			}
			got = readAllEventually(t, s, seed.Position, want)
			var streams []string
			for _, e := range got {
				streams = append(streams, e.StreamID)
			}
			if end == "commit" {
				assert.Equal(t, []string{streamA, streamB}, streams, "A committed last but was written by the older transaction")
			} else {
				assert.Equal(t, []string{streamB}, streams)
			}
		})
	}
}

// TestReadAllHeldBackByAnyWritingTransaction documents the cost: an open transaction that has an xid
// delays every reader of the global log, even if it never touches the events table.
func TestReadAllHeldBackByAnyWritingTransaction(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT pg_current_xact_id()`) // any write assigns one; this does it directly
	require.NoError(t, err)

	res, err := s.Append(ctx, streamName(t), eventlog.NoStream(), events(t, 1))
	require.NoError(t, err)
	got, err := s.ReadAll(ctx, eventlog.Position{}, 10)
	require.NoError(t, err)
	assert.Empty(t, got)

	require.NoError(t, tx.Rollback(ctx))
	got = readAllEventually(t, s, eventlog.Position{}, 1)
	require.Len(t, got, 1)
	assert.Equal(t, res.Position, got[0].Position)
}

// TestGlobalReaderUnderConcurrentWriters runs appends and multi-stream commits while a reader follows
// the log: what it collected must be every event, once, in strictly increasing positions.
func TestGlobalReaderUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	const writers, perWriter = 6, 24 // perWriter even: every other op commits two events

	var (
		wg      sync.WaitGroup
		written sync.Map
		done    = make(chan struct{})
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				e := event(t, "booking.scheduled.v1")
				var err error
				if i%2 == 0 {
					_, err = s.Append(ctx, fmt.Sprintf("booking-w%d-%d", w, i), eventlog.NoStream(), []eventlog.EventData{e})
				} else {
					e2 := event(t, "booking.scheduled.v1")
					_, err = s.Commit(ctx, commitOf(fmt.Sprintf("d-%d-%d", w, i),
						appendOf(fmt.Sprintf("booking-w%d-%d-a", w, i), eventlog.NoStream(), e),
						appendOf(fmt.Sprintf("booking-w%d-%d-b", w, i), eventlog.NoStream(), e2)))
					written.Store(e2.ID, true)
				}
				if !assert.NoError(t, err) {
					return
				}
				written.Store(e.ID, true)
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()

	// Read while they write, then until everything written was read: an open transaction elsewhere in
	// the shared cluster may hold the tail back for a while, which is allowed; skipping is not.
	seen := map[eventlog.EventID]bool{}
	var from eventlog.Position
	deadline := time.Now().Add(30 * time.Second)
read:
	for {
		batch, err := s.ReadAll(ctx, from, 7)
		require.NoError(t, err)
		for _, e := range batch {
			require.Equal(t, 1, e.Position.Compare(from), "position %s not after %s", e.Position, from)
			require.False(t, seen[e.ID], "event %s returned twice", e.ID)
			seen[e.ID] = true
			from = e.Position
		}
		select {
		case <-done:
			if len(seen) >= writers*perWriter*3/2 || time.Now().After(deadline) {
				break read
			}
			if len(batch) == 0 {
				time.Sleep(10 * time.Millisecond)
			}
		default:
		}
	}
	n := 0
	written.Range(func(k, _ any) bool {
		n++
		assert.True(t, seen[k.(eventlog.EventID)], "event %s was skipped", k)
		return true
	})
	assert.Equal(t, writers*perWriter*3/2, n)
	assert.Len(t, seen, n)
}

func TestReadAllLimitAndEmpty(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	got, err := s.ReadAll(ctx, eventlog.Position{}, 10)
	require.NoError(t, err)
	assert.NotNil(t, got)
	assert.Empty(t, got)
	got, err = s.ReadStream(ctx, "booking-missing")
	require.NoError(t, err)
	assert.NotNil(t, got)
	assert.Empty(t, got)

	_, err = s.Append(ctx, streamName(t), eventlog.NoStream(), events(t, 3))
	require.NoError(t, err)
	require.Len(t, readAllEventually(t, s, eventlog.Position{}, 3), 3)
	got, err = s.ReadAll(ctx, eventlog.Position{}, 0)
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = s.ReadAll(ctx, eventlog.Position{}, 2)
	require.NoError(t, err)
	assert.Len(t, got, 2)
}

func TestAppendHonoursContext(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	stream := streamName(t)
	_, err := s.Append(ctx, stream, eventlog.NoStream(), events(t, 1))
	require.NoError(t, err)

	// Hold the stream's lock so that the append waits, then give up on it.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT 1 FROM streams WHERE stream_id = $1 FOR UPDATE`, stream)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = s.Append(short, stream, eventlog.Exact(1), events(t, 1))
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "canceling statement"), "got %v", err)
	assert.NotErrorIs(t, err, eventlog.ErrUnavailable, "the caller's deadline is not an outage")
}

// readAllEventually reads from from until at least want events are readable. Other databases' open
// transactions in the same cluster can hold the log back for a moment; that delays, it never reorders.
func readAllEventually(t *testing.T, s *postgres.Store, from eventlog.Position, want int) []eventlog.RecordedEvent {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := s.ReadAll(testCtx(t), from, 1000)
		require.NoError(t, err)
		if len(got) >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestVersionConflictDetailIsTheActualVersion pins bl_append's documented error contract at the SQL
// level: a version conflict (BL001) carries the stream's actual version as its DETAIL, raised by
// bl_append and answered as the detail column by bl_try_appends, which a group commit reads instead
// of an error. A caller of the functions that reloads from that version must get the true one.
func TestVersionConflictDetailIsTheActualVersion(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	stream := streamName(t)
	_, err := s.Append(ctx, stream, eventlog.NoStream(), events(t, 2))
	require.NoError(t, err)

	_, err = pool.Exec(ctx, `SELECT * FROM bl_append($1, 'exact', 1, ARRAY[gen_random_uuid()], ARRAY['x.v1'], ARRAY[NULL::bytea], ARRAY[NULL::bytea])`, stream)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "BL001", pgErr.Code)
	assert.Equal(t, "2", pgErr.Detail)

	var status, detail string
	require.NoError(t, pool.QueryRow(ctx, `SELECT status, detail FROM bl_try_appends(ARRAY[$1], ARRAY['no_stream'], ARRAY[0::bigint], ARRAY[1],
		ARRAY[gen_random_uuid()], ARRAY['x.v1'], ARRAY[NULL::bytea], ARRAY[NULL::bytea])`, stream).Scan(&status, &detail))
	assert.Equal(t, "BL001", status)
	assert.Equal(t, "2", detail)
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM events WHERE stream_id = $1`, stream), "nothing appended")
}

// Two appends that both find a stream missing: the one that creates it second waits for the first to
// commit and then appends after its events, whatever it expected (any, stream-exists, exact); it is
// never refused because the stream row appeared between its UPDATE and its INSERT (bl_append's last
// UPDATE), and its versions continue the stream. The first append's transaction is held open here,
// so the race is taken every time.
func TestAppendToAStreamCreatedConcurrentlyFollowsIt(t *testing.T) {
	t.Parallel()
	for _, expected := range []eventlog.ExpectedVersion{eventlog.Any(), eventlog.StreamExists(), eventlog.Exact(2)} {
		t.Run(expected.String(), func(t *testing.T) {
			t.Parallel()
			s, pool := newStore(t)
			ctx := testCtx(t)
			stream := streamName(t)
			first, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = first.Rollback(ctx) }()
			_, err = first.Exec(ctx, `SELECT * FROM bl_append($1, 'no_stream', 0, ARRAY[gen_random_uuid(), gen_random_uuid()], ARRAY['x.v1', 'x.v1'],
				ARRAY[NULL::bytea, NULL::bytea], ARRAY[NULL::bytea, NULL::bytea])`, stream)
			require.NoError(t, err)

			type answer struct {
				res eventlog.AppendResult
				err error
			}
			done := make(chan answer, 1)
			evs := events(t, 3)
			go func() {
				res, err := s.Append(ctx, stream, expected, evs)
				done <- answer{res, err}
			}()
			require.Eventually(t, func() bool {
				return count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
			}, 10*time.Second, 5*time.Millisecond, "the second append waits for the first")
			require.NoError(t, first.Commit(ctx))

			a := <-done
			require.NoError(t, a.err)
			assert.Equal(t, uint64(3), a.res.FirstVersion)
			assert.Equal(t, uint64(5), a.res.LastVersion)
			assert.False(t, a.res.Duplicate)
			stored, err := s.ReadStream(ctx, stream)
			require.NoError(t, err)
			require.Len(t, stored, 5)
			for i, e := range stored {
				assert.Equal(t, uint64(i+1), e.Version)
			}
			assert.Equal(t, evs[2].ID, stored[4].ID)
			assert.Equal(t, 5, count(t, pool, `SELECT version::int FROM streams WHERE stream_id = $1`, stream))
		})
	}
}
