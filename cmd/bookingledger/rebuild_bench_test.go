package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/cmd/bookingledger/internal/servetest"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

const (
	// envRebuildScaleSizes lists the log sizes of BenchmarkRebuildAtScale, comma-separated.
	envRebuildScaleSizes     = "BOOKINGLEDGER_BENCH_REBUILD_SIZES"
	defaultRebuildScaleSizes = "250000,1000000"
	// envRebuildScaleLogs lists the log shapes (scaleLogs' names) BenchmarkRebuildAtScale seeds and
	// rebuilds, comma-separated; default all.
	envRebuildScaleLogs = "BOOKINGLEDGER_BENCH_REBUILD_LOGS"
)

// BenchmarkRebuildAtScale measures `bookingledger rebuild` from outside, as an operator runs it: for
// each size of BOOKINGLEDGER_BENCH_REBUILD_SIZES (default 250,000 and 1,000,000 events; 5,000,000 is
// the documented large run) a log of one Calendly create per booking on 200 hosts is written straight
// into the events table with COPY (sending it over HTTP would take longer than the rebuild), then the
// real binary rebuilds the calendar as a child process. Three logs of each size (scaleLogs): one whose
// meetings overlap (nearly every booking conflicts: a reconciliation item each, few slot holders) and
// one whose meetings are apart (no conflict: every claim holds its slot, so the double-booking guard
// covers all of them), and past90, the apart log with nine bookings of ten in the past. Reported: events/s over the child's wall time, its peak resident
// memory (getrusage maxrss) in MB and in bytes per event, and the CPU per event (user+system, in µs)
// of the child (rebuild-cpu-us/event) and of the whole PostgreSQL cluster (pg-cpu-us/event, from
// /proc when the cluster runs on this machine): on a shared machine the CPU counts and the memory
// are disturbed far less than the rate. Not run by make test; `make bench` runs it.
func BenchmarkRebuildAtScale(b *testing.B) {
	setting := os.Getenv(envRebuildScaleSizes)
	if setting == "" {
		setting = defaultRebuildScaleSizes
	}
	bin := benchBinary(b)
	for _, s := range strings.Split(setting, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			b.Fatalf("%s: %q is not a number of events", envRebuildScaleSizes, s)
		}
		for _, log := range scaleLogs {
			if only := os.Getenv(envRebuildScaleLogs); only != "" && !slices.Contains(strings.Split(only, ","), log.name) {
				continue
			}
			// Seeded once per size, outside b.Run: the testing package calls a sub-benchmark's function
			// once with b.N = 1 before it runs the -benchtime count, and a seed inside would be made twice.
			dbURL := servetest.NewDatabaseURL(b)
			pool := pgtest.Open(b, dbURL)
			seedCreates(b, pool, n, log)
			settle(b, pool)
			postmaster := postmasterOf(b, pool)
			pool.Close()
			b.Run(fmt.Sprintf("log=%s/events=%d", log.name, n), func(b *testing.B) { rebuildAtScale(b, bin, dbURL, postmaster, n) })
			dropDatabase(b, dbURL)
		}
	}
}

// settle puts the cluster in the state an operator's rebuild meets before it is measured: the seeded
// log vacuumed (hint bits and visibility map set, as autovacuum leaves a log of years; a log written
// a moment ago would have its first reader set them on every page), the seed's writes flushed by a
// checkpoint, and no autovacuum worker running. Before this, a log's rebuild shared the machine with
// the flushing and vacuuming left by the seed and by the rebuild before it (the swap turns autovacuum
// back on over a million fresh rows): past90 at 1,000,000 events measured 40,941 events/s after the
// two other logs against 48,127 alone (docs/benchmarks.md).
func settle(b testing.TB, pool *pgxpool.Pool) {
	b.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) events, streams`); err != nil {
		b.Fatalf("vacuum the seeded log: %v", err)
	}
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		b.Logf("no checkpoint before the rebuild (%v): the seed's writes may be flushed during it", err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var workers int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`).Scan(&workers); err != nil {
			b.Fatalf("look for autovacuum workers: %v", err)
		}
		if workers == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Logf("%d autovacuum workers still running after 5 minutes: measuring anyway", workers)
			return
		}
		time.Sleep(time.Second)
	}
}

// dropDatabase drops the measured database at once (its cleanup would drop it at the end of the
// benchmark): autovacuum would otherwise vacuum and analyze its swapped-in tables during the next
// log's rebuild, and a 5,000,000-event log takes gigabytes of disk.
func dropDatabase(b testing.TB, dbURL string) {
	b.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		b.Fatalf("parse %s: %v", pgtest.EnvURL, err)
	}
	admin := pgtest.Open(b, os.Getenv(pgtest.EnvURL))
	defer admin.Close()
	if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{cfg.Database}.Sanitize()+" WITH (FORCE)"); err != nil {
		b.Fatalf("drop the measured database: %v", err)
	}
}

// postmasterOf is the PID of the cluster's postmaster, from its data directory; "" when the cluster
// is not on this machine.
func postmasterOf(b *testing.B, pool *pgxpool.Pool) string {
	var dataDir string
	if err := pool.QueryRow(context.Background(), "SHOW data_directory").Scan(&dataDir); err != nil {
		b.Logf("no data directory (%v): PostgreSQL's CPU is not reported", err)
		return ""
	}
	raw, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		b.Logf("postmaster.pid not readable (%v): PostgreSQL's CPU is not reported", err)
		return ""
	}
	pid, _, _ := strings.Cut(string(raw), "\n")
	return pid
}

// rebuildAtScale runs `bookingledger rebuild` of the n-event log at dbURL b.N times; postmaster
// (may be "") is the cluster's, whose CPU is counted.
func rebuildAtScale(b *testing.B, bin, dbURL, postmaster string, n int) {
	var wall, cpu time.Duration
	var peak, pgTicks int64
	pgOK := postmaster != ""
	phases := map[string]float64{} // seconds per phase, summed over the runs
	b.ResetTimer()
	for range b.N {
		cmd := exec.Command(bin, "rebuild", "--quiet")
		cmd.Env = append(os.Environ(), "BOOKINGLEDGER_DATABASE_URL="+dbURL, "BOOKINGLEDGER_LOG_LEVEL=error")
		var before int64
		if pgOK {
			before, pgOK = clusterTicks(postmaster)
		}
		start := time.Now()
		out, err := cmd.CombinedOutput()
		wall += time.Since(start)
		if pgOK {
			after, ok := clusterTicks(postmaster)
			pgTicks, pgOK = pgTicks+after-before, ok
		}
		if err != nil {
			b.Fatalf("rebuild: %v\n%s", err, out)
		}
		// "phases: fold 7.4s, compute 26.7s, …" (read.go): the write's phases.
		if _, list, ok := strings.Cut(string(out), "phases: "); ok {
			for _, p := range strings.Split(strings.TrimSpace(list), ", ") {
				var name string
				var sec float64
				if _, err := fmt.Sscanf(p, "%s %fs", &name, &sec); err == nil {
					phases[name] += sec
				}
			}
		}
		// Linux reports maxrss in KiB.
		peak = max(peak, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss*1024)
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	b.StopTimer()
	b.ReportMetric(float64(n)*float64(b.N)/wall.Seconds(), "events/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-rss-MB")
	b.ReportMetric(float64(peak)/float64(n), "rss-bytes/event")
	events := float64(n) * float64(b.N)
	b.ReportMetric(float64(cpu.Microseconds())/events, "rebuild-cpu-us/event")
	if pgOK {
		b.ReportMetric(float64(pgTicks)*1e6/ticksPerSecond/events, "pg-cpu-us/event")
	}
	for name, sec := range phases {
		b.ReportMetric(sec/float64(b.N), name+"-s")
	}
}

// scaleLog is a shape of BenchmarkRebuildAtScale's log: where booking i's meeting starts.
type scaleLog struct {
	name  string
	start func(day time.Time, i int) time.Time
}

// scaleLogs are the logs BenchmarkRebuildAtScale rebuilds. On each of the 200 hosts (booking i's is
// i mod 200) the meetings last 30 minutes. Overlapping ones start at one of 32 quarter hours from 9:00
// on one of 60 days, so that a host's meetings pile up on few slots: at 250,000 events, 96 % of the
// bookings conflict. Apart ones start an hour after the host's previous one: none conflicts. Past90
// is the apart log with nine bookings of ten in the past (from 2020-01-01, ended long before any
// run), the shape of a calendar that has been in use for years: none conflicts, and only a tenth of
// the claims end after the guard's horizon (docs/adr/0022-the-guard-covers-what-can-still-clash.md).
var scaleLogs = []scaleLog{
	{"overlapping", func(day time.Time, i int) time.Time {
		return day.AddDate(0, 0, i%60).Add(time.Duration(9*60+15*(i/60%32)) * time.Minute)
	}},
	{"apart", func(day time.Time, i int) time.Time { return day.Add(time.Duration(i/200) * time.Hour) }},
	{"past90", func(day time.Time, i int) time.Time {
		if i%10 != 0 {
			day = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return day.Add(time.Duration(i/200) * time.Hour)
	}},
}

// scaleNamespace names the seeded bookings' UUIDs.
var scaleNamespace = uuid.MustParse("5c0a1e00-0000-5000-8000-000000000000")

// seedCreates writes n bookings' creates into the events and streams tables as appends would, a
// transaction per 50,000 events, without keeping the log in memory. Booking i's id is a UUID made
// from i, as a provider's ids are random: in a log written by deliveries the streams' names say
// nothing of the order their events were committed in. Named calendly-scale-<i> until 2026-12-06,
// the log was nearly in its streams' order (a correlation of 0.83 between name and place), which
// spared PostgreSQL's sorts by stream and by booking part of their work.
func seedCreates(b testing.TB, pool *pgxpool.Pool, n int, log scaleLog) {
	b.Helper()
	ctx := context.Background()
	codec := eventcodec.JSON{}
	day := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	const chunk = 50_000
	for from := 0; from < n; from += chunk {
		to := min(from+chunk, n)
		i := from
		src := pgx.CopyFromFunc(func() ([]any, error) {
			if i == to {
				return nil, nil
			}
			id := booking.ID("calendly-" + uuid.NewSHA1(scaleNamespace, binary.BigEndian.AppendUint64(nil, uint64(i))).String())
			start := log.start(day, i)
			var eid eventlog.EventID
			binary.BigEndian.PutUint64(eid[:8], uint64(i)+1)
			eid[8] = 0x5c
			ev := booking.Event{ID: eid, Booking: id, Provider: "calendly", ProviderRef: string(id) + " created",
				OccurredAt: day.Add(-time.Duration(n-i) * time.Second),
				Payload: booking.Scheduled{Capacity: 1, Slot: booking.Slot{Meeting: "scale-ev-" + strconv.Itoa(i),
					Resources: []string{"https://api.calendly.com/users/SCALE-" + strconv.Itoa(i%200)}, Start: start, End: start.Add(30 * time.Minute)}}}
			data, err := codec.Encode(ev)
			i++
			return []any{id.Stream(), int64(1), [16]byte(data.ID), data.Type, data.Data, data.Metadata}, err
		})
		if _, err := pool.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"stream_id", "version", "event_id", "event_type", "data", "metadata"}, src); err != nil {
			b.Fatalf("seed events %d–%d: %v", from, to, err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO streams (stream_id, version) SELECT stream_id, max(version) FROM events GROUP BY stream_id;
ANALYZE events, streams`); err != nil {
		b.Fatalf("seed streams: %v", err)
	}
}
