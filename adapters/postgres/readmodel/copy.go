package readmodel

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// A rebuild loads millions of rows by COPY. pgx's CopyFrom takes each row as []any and encodes every
// value through its type map: a boxed value, an encode plan looked up and often a value or two
// allocated per column — a quarter of a rebuild's own CPU in its compute phase. The rows here are the
// read model's own, of a handful of column types known in advance, so they are written straight into
// COPY's binary format (PostgreSQL's documentation, COPY, "Binary Format", with each type's binary
// representation: what its send function writes and its receive function reads) by typed calls, and
// the server checks each value as it receives it. copy_test.go holds every encoding to what pgx
// writes for the same value.

// copyRows loads n rows into table's columns with COPY … FROM STDIN BINARY, fill writing row i's
// values, one call per column in columns' order.
func copyRows(ctx context.Context, tx pgx.Tx, table string, columns []string, n int, fill func(i int, w *copyWriter) error) (int64, error) {
	if n == 0 {
		return 0, nil
	}
	quoted := make([]string, len(columns))
	for i, c := range columns {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	buf := copyBuffers.Get().(*[]byte)
	r := &copyReader{n: n, fill: fill, w: copyWriter{columns: int16(len(columns))}}
	r.w.buf = append((*buf)[:0], "PGCOPY\n\377\r\n\000"...)
	r.w.buf = binary.BigEndian.AppendUint64(r.w.buf, 0) // no flags, no header extension
	tag, err := tx.Conn().PgConn().CopyFrom(ctx, r,
		"COPY "+pgx.Identifier{table}.Sanitize()+" ("+strings.Join(quoted, ", ")+") FROM STDIN BINARY")
	if failed := r.failed(); failed != nil { // fill's own failure, which the server saw only as an abort
		return 0, failed
	}
	if err != nil {
		// pgconn may have left its reading goroutine behind on a broken connection: the buffer is
		// not reused.
		return 0, err
	}
	if cap(r.w.buf) <= maxCopyBuffer {
		*buf = r.w.buf
		copyBuffers.Put(buf)
	}
	return tag.RowsAffected(), nil
}

// copyBuffers are copyReader's buffers, reused from one COPY to the next: a rebuild runs thousands
// of them, and zeroing a fresh buffer for each was a few per cent of its CPU. A buffer holds about
// one read of pgconn (64 kB) and a row; one grown larger by a huge row is let go (maxCopyBuffer).
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1<<17); return &b }}

const maxCopyBuffer = 1 << 20

// copyReader writes rows as the connection reads them, about one read's worth at a time. pgconn reads
// it from a goroutine of its own, which a broken connection leaves behind: err is behind mu.
type copyReader struct {
	n, next int
	fill    func(i int, w *copyWriter) error
	w       copyWriter
	off     int
	mu      sync.Mutex
	err     error
}

func (r *copyReader) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *copyReader) Read(p []byte) (int, error) {
	// What the last read left (less than a row) moves to the front, so that the buffer stays about
	// one read long however many rows the COPY carries.
	if r.off > 0 {
		k := copy(r.w.buf, r.w.buf[r.off:])
		r.w.buf, r.off = r.w.buf[:k], 0
	}
	for len(r.w.buf)-r.off < len(p) && r.next <= r.n {
		if r.next == r.n {
			r.w.buf = binary.BigEndian.AppendUint16(r.w.buf, 0xffff) // the trailer
			r.next++
			break
		}
		if err := r.w.row(func() error { return r.fill(r.next, &r.w) }); err != nil {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			return 0, err
		}
		r.next++
	}
	if r.off == len(r.w.buf) {
		return 0, io.EOF
	}
	k := copy(p, r.w.buf[r.off:])
	r.off += k
	return k, nil
}

// copyWriter appends one row's fields in COPY's binary format.
type copyWriter struct {
	buf     []byte
	columns int16
	fields  int16
	err     error
}

// row writes one row: its field count, then what f writes, which must be one field per column.
func (w *copyWriter) row(f func() error) error {
	w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(w.columns))
	w.fields = 0
	if err := cmp.Or(f(), w.err); err != nil {
		return err
	}
	if w.fields != w.columns {
		return fmt.Errorf("a COPY row of %d fields for %d columns", w.fields, w.columns)
	}
	return nil
}

// field starts a field of n bytes (-1: NULL).
func (w *copyWriter) field(n int) {
	w.fields++
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(int32(n)))
}

func (w *copyWriter) null() { w.field(-1) }

func (w *copyWriter) text(s string) {
	w.field(len(s))
	w.buf = append(w.buf, s...)
}

// texts writes a text[] of one dimension from 1 (as pgx writes an empty one too: PostgreSQL
// stores it as the empty array), nil as NULL.
func (w *copyWriter) texts(s []string) {
	if s == nil {
		w.null()
		return
	}
	n := 20
	for _, e := range s {
		n += 4 + len(e)
	}
	w.field(n)
	w.buf = binary.BigEndian.AppendUint32(w.buf, 1)       // dimensions
	w.buf = binary.BigEndian.AppendUint32(w.buf, 0)       // no NULL elements
	w.buf = binary.BigEndian.AppendUint32(w.buf, textOID) // the elements' type
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(s)))
	w.buf = binary.BigEndian.AppendUint32(w.buf, 1) // lower bound
	for _, e := range s {
		w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(e)))
		w.buf = append(w.buf, e...)
	}
}

const textOID = 25

// int4 writes v, which must fit in 32 bits.
func (w *copyWriter) int4(v int) {
	if v != int(int32(v)) && w.err == nil {
		w.err = fmt.Errorf("%d is out of range for an integer column", v)
	}
	w.field(4)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v))
}

func (w *copyWriter) int8(v int64) {
	w.field(8)
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v))
}

func (w *copyWriter) boolean(v bool) {
	w.field(1)
	if v {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

// timestamptz writes t cut to microseconds.
func (w *copyWriter) timestamptz(t time.Time) {
	w.field(8)
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(sinceY2K(t)))
}

// nullTimestamptz writes t as timestamptz does, the zero time as NULL.
func (w *copyWriter) nullTimestamptz(t time.Time) {
	if t.IsZero() {
		w.null()
		return
	}
	w.timestamptz(t)
}

// during writes the tstzrange [start, end), NULL when start is the zero time.
func (w *copyWriter) during(start, end time.Time) {
	if start.IsZero() {
		w.null()
		return
	}
	w.field(1 + 2*(4+8))
	w.buf = append(w.buf, rangeLowerInclusive)
	w.buf = binary.BigEndian.AppendUint32(w.buf, 8)
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(sinceY2K(start)))
	w.buf = binary.BigEndian.AppendUint32(w.buf, 8)
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(sinceY2K(end)))
}

// rangeLowerInclusive is a range's flags for [lower, upper): both bounds given, the lower one in.
const rangeLowerInclusive = 0x02

// jsonb writes a JSON document (jsonb's binary format: version 1, then the text).
func (w *copyWriter) jsonb(doc []byte) {
	w.field(1 + len(doc))
	w.buf = append(w.buf, 1)
	w.buf = append(w.buf, doc...)
}

// y2k is where PostgreSQL counts its timestamps' microseconds from.
var y2k = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// sinceY2K is t in PostgreSQL's count, cut to microseconds as micro cuts it.
func sinceY2K(t time.Time) int64 {
	t = micro(t)
	return (t.Unix()-y2k.Unix())*1_000_000 + int64(t.Nanosecond()/1000)
}
