package postgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/domain/eventlog"
)

// benchPayload is a realistic event body, about 1 KiB: a scheduled booking as a codec might write it.
var benchPayload = []byte(`{"booking_id":"bk_01HZX3Q9V8M2N4P6R8T0W2Y4A6","provider":"calendly",` +
	`"provider_event":"invitee.created","provider_time":"2026-03-14T09:26:53.589Z",` +
	`"meeting":{"id":"https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2",` +
	`"name":"30 Minute Discovery Call","location":{"type":"zoom","join_url":"https://zoom.us/j/98765432101?pwd=abcdefghijklmnop"}},` +
	`"resource":"https://api.calendly.com/users/AAAAAAAAAAAAAAAA","slot":{"start":"2026-03-21T15:00:00Z","end":"2026-03-21T15:30:00Z",` +
	`"timezone":"Europe/Berlin"},"invitee":{"uri":"https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2/invitees/AAAAAAAAAAAAAAAA",` +
	`"name_hash":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","email_domain":"example.com",` +
	`"questions":[{"q":"What would you like to discuss?","a":"Pricing for the team plan."}]},` +
	`"payment":{"external_id":"pi_3OqR2sLkdIwHu7ix0abcdefg","provider":"stripe","amount":"49.00","currency":"EUR","successful":true},` +
	`"cancel_url":"https://calendly.com/cancellations/AAAAAAAAAAAAAAAA","status":"active","created_at":"2026-03-14T09:26:53.547Z"}`)

var benchMetadata = []byte(`{"delivery_id":"e2f0c1a4-5b6d-4e7f-8a9b-0c1d2e3f4a5b","received_at":"2026-03-14T09:26:54.012Z","codec":"v1"}`)

// BenchmarkAppendVsInsert compares Store.Append (one round trip to bl_append: stream row lock and
// version, dedupe lookup by event ID, expected-version check, the event row with its three indexes)
// with a bare single-row INSERT of the same bytes into a table with only a primary key, at several
// concurrencies, in one database and one run. Reported per sub-benchmark:
//
//	appends/s      Store.Append
//	inserts/s      the bare INSERT
//	append/insert  their ratio (the figure the target is about)
//	eventrows/s    a plain INSERT of the event row into a copy of the events table (same indexes, no
//	               function, no stream row): separates the cost of the indexes from that of bl_append
//
// The three are measured in alternating rounds so that drift (checkpoints, other load on the machine)
// hits them alike. ns/op covers all three and means little.
//
//	new-stream:  every append is the first event of a new stream (NoStream): the costliest path.
//	stream-of-4: each worker appends to its own stream with Exact(version), a new stream every 4
//	             events: the life of a typical booking.
func BenchmarkAppendVsInsert(b *testing.B) {
	pool := benchPool(b)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_inserts (
		id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, data bytea, metadata bytea)`); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_event_rows (LIKE events INCLUDING ALL)`); err != nil {
		b.Fatal(err)
	}
	var version, fsync, syncCommit string
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit')`).Scan(&version, &fsync, &syncCommit); err != nil {
		b.Fatal(err)
	}
	b.Logf("PostgreSQL %s, fsync=%s, synchronous_commit=%s; payload %d B data + %d B metadata",
		version, fsync, syncCommit, len(benchPayload), len(benchMetadata))
	store := postgres.NewStore(pool)
	var run atomic.Int64
	for _, shape := range []struct {
		name      string
		perStream int
	}{{"new-stream", 1}, {"stream-of-4", 4}} {
		for _, conc := range []int{1, 8, 32} {
			// The name says whether commits were durable, so that pasted output explains itself.
			b.Run(fmt.Sprintf("fsync=%s/%s/c=%d", fsync, shape.name, conc), func(b *testing.B) {
				prefix := fmt.Sprintf("booking-bench-%d", run.Add(1))
				streams := make([]benchStream, conc)
				appendOp := func(w int) error {
					st := &streams[w]
					if st.version == uint64(shape.perStream) || st.name == "" {
						st.n++
						st.name, st.version = fmt.Sprintf("%s-%d-%d", prefix, w, st.n), 0
					}
					var id eventlog.EventID
					if _, err := rand.Read(id[:]); err != nil {
						return err
					}
					res, err := store.Append(ctx, st.name, eventlog.Exact(st.version), []eventlog.EventData{{
						ID: id, Type: "booking.scheduled.v1", Data: benchPayload, Metadata: benchMetadata}})
					if err != nil {
						return err
					}
					st.version = res.LastVersion
					return nil
				}
				insertOp := func(int) error {
					_, err := pool.Exec(ctx, `INSERT INTO bench_inserts (data, metadata) VALUES ($1, $2)`, benchPayload, benchMetadata)
					return err
				}
				var rows atomic.Int64
				rowOp := func(int) error {
					var id [16]byte
					if _, err := rand.Read(id[:]); err != nil {
						return err
					}
					_, err := pool.Exec(ctx, `INSERT INTO bench_event_rows (stream_id, version, event_id, event_type, data, metadata)
						VALUES ($1, 1, $2, 'booking.scheduled.v1', $3, $4)`,
						fmt.Sprintf("%s-row-%d", prefix, rows.Add(1)), id, benchPayload, benchMetadata)
					return err
				}
				// Warm every connection's statement cache outside the timer.
				if _, err := runConcurrently(conc, 2*conc, appendOp); err != nil {
					b.Fatal(err)
				}
				if _, err := runConcurrently(conc, 2*conc, insertOp); err != nil {
					b.Fatal(err)
				}
				if _, err := runConcurrently(conc, 2*conc, rowOp); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				var appendTime, insertTime, rowTime time.Duration
				// Many short alternating rounds: fsync latency on a shared disk drifts within seconds.
				rounds := max(1, min(32, b.N/(4*conc)))
				for r := range rounds {
					n := b.N/rounds + boolInt(r < b.N%rounds)
					if n == 0 {
						continue
					}
					d, err := runConcurrently(conc, n, appendOp)
					if err != nil {
						b.Fatal(err)
					}
					appendTime += d
					if d, err = runConcurrently(conc, n, insertOp); err != nil {
						b.Fatal(err)
					}
					insertTime += d
					if d, err = runConcurrently(conc, n, rowOp); err != nil {
						b.Fatal(err)
					}
					rowTime += d
				}
				b.StopTimer()
				appends := float64(b.N) / appendTime.Seconds()
				inserts := float64(b.N) / insertTime.Seconds()
				b.ReportMetric(appends, "appends/s")
				b.ReportMetric(inserts, "inserts/s")
				b.ReportMetric(appends/inserts, "append/insert")
				b.ReportMetric(float64(b.N)/rowTime.Seconds(), "eventrows/s")
			})
		}
	}
}

type benchStream struct {
	name    string
	n       int
	version uint64
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// runConcurrently runs op n times on conc goroutines; op gets the goroutine's index, so per-worker
// state needs no lock.
func runConcurrently(conc, n int, op func(worker int) error) (time.Duration, error) {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
	)
	start := time.Now()
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := op(w); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), firstErr
}

func benchPool(b *testing.B) *pgxpool.Pool {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabaseURL(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 40 // the highest concurrency measured never waits for a connection
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}
