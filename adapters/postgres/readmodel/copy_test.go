package readmodel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
)

// TestCopyWriterWritesWhatPgxWrites holds each of copyWriter's encodings to pgx's binary encoding of
// the same value: the bytes must be the same, NULL where pgx writes NULL.
func TestCopyWriterWritesWhatPgxWrites(t *testing.T) {
	t.Parallel()
	m := pgtype.NewMap()
	ny := time.FixedZone("EST", -5*3600)
	times := []time.Time{
		time.Date(2027, 3, 1, 9, 0, 0, 123456789, time.UTC), // nanoseconds are cut, not rounded
		time.Date(2027, 3, 1, 9, 0, 0, 999999999, ny),
		time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC), // before PostgreSQL's epoch
		time.Date(1950, 6, 1, 0, 0, 0, 1000, time.UTC),           // before Unix's
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	type pair struct {
		name  string
		write func(w *copyWriter)
		oid   uint32
		value any
	}
	cases := []pair{
		{"empty text", func(w *copyWriter) { w.text("") }, pgtype.TextOID, ""},
		{"text", func(w *copyWriter) { w.text(`ü "a" \b`) }, pgtype.TextOID, `ü "a" \b`},
		{"NULL text[]", func(w *copyWriter) { w.texts(nil) }, pgtype.TextArrayOID, nil},
		{"empty text[]", func(w *copyWriter) { w.texts([]string{}) }, pgtype.TextArrayOID, []string{}},
		{"text[]", func(w *copyWriter) { w.texts([]string{"a", "", "NULL", `{"x"}`}) }, pgtype.TextArrayOID, []string{"a", "", "NULL", `{"x"}`}},
		{"int4", func(w *copyWriter) { w.int4(-7) }, pgtype.Int4OID, int32(-7)},
		{"largest int4", func(w *copyWriter) { w.int4(1<<31 - 1) }, pgtype.Int4OID, int32(1<<31 - 1)},
		{"int8", func(w *copyWriter) { w.int8(-1 << 40) }, pgtype.Int8OID, int64(-1 << 40)},
		{"true", func(w *copyWriter) { w.boolean(true) }, pgtype.BoolOID, true},
		{"false", func(w *copyWriter) { w.boolean(false) }, pgtype.BoolOID, false},
		{"NULL timestamptz", func(w *copyWriter) { w.nullTimestamptz(time.Time{}) }, pgtype.TimestamptzOID, nil},
		{"NULL tstzrange", func(w *copyWriter) { w.during(time.Time{}, time.Time{}) }, pgtype.TstzrangeOID, nil},
		{"jsonb", func(w *copyWriter) { w.jsonb([]byte(`[{"a":1}]`)) }, pgtype.JSONBOID, `[{"a":1}]`},
	}
	for i, at := range times {
		cases = append(cases,
			pair{fmt.Sprint("timestamptz ", i), func(w *copyWriter) { w.timestamptz(at) }, pgtype.TimestamptzOID, micro(at)},
			pair{fmt.Sprint("non-NULL timestamptz ", i), func(w *copyWriter) { w.nullTimestamptz(at) }, pgtype.TimestamptzOID, micro(at)},
			pair{fmt.Sprint("tstzrange ", i), func(w *copyWriter) { w.during(at, at.Add(90*time.Minute)) }, pgtype.TstzrangeOID,
				tsRange(at, at.Add(90*time.Minute))})
	}
	for _, c := range cases {
		w := copyWriter{columns: 1}
		require.NoError(t, w.row(func() error { c.write(&w); return nil }), c.name)
		want, err := m.Encode(c.oid, pgtype.BinaryFormatCode, c.value, []byte{}) // nil only for NULL
		require.NoError(t, err, c.name)
		require.Equal(t, uint16(1), binary.BigEndian.Uint16(w.buf), c.name)
		n := int32(binary.BigEndian.Uint32(w.buf[2:]))
		if want == nil {
			require.Equal(t, int32(-1), n, "%s: NULL", c.name)
			require.Len(t, w.buf, 6, c.name)
			continue
		}
		require.Equal(t, int32(len(want)), n, c.name)
		require.Equal(t, want, w.buf[6:], c.name)
	}

	// A row of the wrong width, and an int4 that does not fit, are errors, not rows.
	w := copyWriter{columns: 2}
	require.ErrorContains(t, w.row(func() error { w.text("only one"); return nil }), "1 fields for 2 columns")
	w = copyWriter{columns: 1}
	require.ErrorContains(t, w.row(func() error { w.int4(1 << 31); return nil }), "out of range")
}

// TestCopyRowsLoadsWhatItIsGiven loads more rows than one read of the connection takes, of every
// column type the rebuild writes, and reads them back; a row that fails to be written loads nothing
// and is the error returned.
func TestCopyRowsLoadsWhatItIsGiven(t *testing.T) {
	t.Parallel()
	PostgresOnly(t)
	pool := pgtest.NewDatabase(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE copied (name text NOT NULL, tags text[], n integer, big bigint, yes boolean,
		at timestamptz, during tstzrange, doc jsonb)`)
	require.NoError(t, err)
	columns := []string{"name", "tags", "n", "big", "yes", "at", "during", "doc"}
	start := time.Date(2027, 3, 1, 9, 0, 0, 123456789, time.UTC)
	const rows = 5_000 // about 400 KB: several reads of 64 KB
	write := func(i int, w *copyWriter) error {
		w.text(fmt.Sprintf("row %d with some text to make it longer", i))
		if i%3 == 0 {
			w.texts(nil)
		} else {
			w.texts([]string{fmt.Sprint(i), `"quoted"`})
		}
		w.int4(i)
		w.int8(int64(i) << 33)
		w.boolean(i%2 == 0)
		at := start.Add(time.Duration(i) * time.Minute)
		if i%5 == 0 {
			at = time.Time{}
		}
		w.nullTimestamptz(at)
		w.during(at, at.Add(time.Hour))
		w.jsonb(fmt.Appendf(nil, `{"i":%d}`, i))
		return nil
	}
	var n int64
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		n, err = copyRows(ctx, tx, "copied", columns, rows, write)
		return err
	}))
	require.EqualValues(t, rows, n)

	got, err := pool.Query(ctx, `SELECT name, tags, n, big, yes, at, lower(during), upper(during), doc->>'i' FROM copied ORDER BY n`)
	require.NoError(t, err)
	i := 0
	for got.Next() {
		var (
			name, doc  string
			tags       []string
			n          int32
			big        int64
			yes        bool
			at, lo, hi *time.Time
		)
		require.NoError(t, got.Scan(&name, &tags, &n, &big, &yes, &at, &lo, &hi, &doc))
		require.Equal(t, fmt.Sprintf("row %d with some text to make it longer", i), name)
		if i%3 == 0 {
			require.Nil(t, tags, "row %d", i)
		} else {
			require.Equal(t, []string{fmt.Sprint(i), `"quoted"`}, tags)
		}
		require.Equal(t, []any{int32(i), int64(i) << 33, i%2 == 0, fmt.Sprint(i)}, []any{n, big, yes, doc})
		if i%5 == 0 {
			require.Nil(t, at, "row %d", i)
			require.Nil(t, lo, "row %d", i)
		} else {
			want := micro(start.Add(time.Duration(i) * time.Minute))
			require.True(t, at.Equal(want) && lo.Equal(want) && hi.Equal(want.Add(time.Hour)), "row %d: %v %v %v", i, at, lo, hi)
		}
		i++
	}
	require.NoError(t, got.Err())
	require.Equal(t, rows, i)

	// A failure half way through: nothing of the COPY stays, and the failure is what copyRows says.
	broken := errors.New("row 3,000 cannot be written")
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := copyRows(ctx, tx, "copied", columns, rows, func(i int, w *copyWriter) error {
			if i == 3_000 {
				return broken
			}
			return write(i, w)
		})
		return err
	})
	require.ErrorIs(t, err, broken)
	// A value the column's type does not take is the server's error.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := copyRows(ctx, tx, "copied", []string{"name", "n"}, 1, func(i int, w *copyWriter) error {
			w.text("x")
			w.int8(1)
			return nil
		})
		return err
	})
	require.ErrorContains(t, err, "binary data")
	// The connection lost half way through (its backend terminated): an error, and nothing stays.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		pid := tx.Conn().PgConn().PID()
		_, err := copyRows(ctx, tx, "copied", columns, 100_000, func(i int, w *copyWriter) error {
			if i == 3_000 {
				if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
					return err
				}
			}
			return write(i%rows, w)
		})
		return err
	})
	require.Error(t, err)
	var count int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM copied`).Scan(&count))
	require.Equal(t, rows, count)
}

// TestCopyReaderStaysOneReadLong reads a COPY of many rows the way pgconn does (64 kB at a time)
// and checks that the stream is every row once, in order, and that the reader's buffer stays about
// one read long however many rows the COPY carries: a buffer that kept what was already sent grew
// to the whole COPY's size, and a rebuild runs thousands of COPYs.
func TestCopyReaderStaysOneReadLong(t *testing.T) {
	t.Parallel()
	const rows, read = 20_000, 65531 // pgconn's read: its 64 kB buffer after the message header
	text := func(i int) string { return fmt.Sprintf("row %d %0*d", i, i%300, 0) }
	r := &copyReader{n: rows, w: copyWriter{columns: 2, buf: make([]byte, 0, 1<<17)},
		fill: func(i int, w *copyWriter) error { w.int4(i); w.text(text(i)); return nil }}
	var got []byte
	p := make([]byte, read)
	largest, short := 0, 0
	for {
		n, err := r.Read(p)
		got = append(got, p[:n]...)
		largest = max(largest, cap(r.w.buf))
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if n < read {
			short++
		}
	}
	require.Equal(t, 1, short, "every read is full but the one with the trailer")
	require.LessOrEqual(t, largest, 1<<17, "the buffer grew past one read and a row")

	want := copyWriter{columns: 2}
	for i := range rows {
		require.NoError(t, want.row(func() error { want.int4(i); want.text(text(i)); return nil }))
	}
	want.buf = binary.BigEndian.AppendUint16(want.buf, 0xffff)
	require.Equal(t, want.buf, got)
}
