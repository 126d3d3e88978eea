package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/projections"
)

const rebuildUsage = `Usage: bookingledger rebuild [calendar|process|relay|all] [--quiet] [flags]

Empties the named projection's read model and replays the whole event log into it; the other
projections are left alone ("all": every one, in the order serve runs them). The default is "calendar" (the calendar, payment links and
reconciliation queue, which is synced once at the end: operators' resolutions are kept). "process"
re-plans every booking's process steps from the calendar: existing steps are found by their keys, so
nothing is sent again (targets are read from the same environment as serve's). An unknown name is
refused with the list of the projections serve runs.

Stop every 'bookingledger serve' on this database first: the serve that runs the projection holds its
lock, and rebuild refuses to start while it does. A serve started during the rebuild waits as a
standby. An interrupted rebuild (Ctrl-C) leaves the read model partly rebuilt; the next serve or
rebuild finishes it. Progress goes to stderr (--quiet: none), the result to stdout: per projection
the events applied, the wall time and their quotient, the rate. After the calendar's replay, each
phase of its write (fold, compute, index, items, swap) is reported on stderr as it ends.`

func RunRebuild(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("rebuild", getenv, stderr, rebuildUsage)
	sf := ledgerdb.RegisterStoreFlags(f, ledgerdb.UsesEvents)
	quiet := f.Bool("quiet", []string{"BOOKINGLEDGER_QUIET"}, "print no progress")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	name := readmodel.ProjectionName
	switch len(pos) {
	case 0:
	case 1:
		name = pos[0]
	default:
		return cmdline.UsageErrorf("rebuild takes at most one projection name, got %q", pos)
	}
	entries := projectionRegistry()
	if name != rebuildAll {
		entry, err := lookupProjection(entries, name)
		if err != nil {
			return err
		}
		entries = []projectionEntry{entry}
	}
	rs, err := ledgerdb.OpenReadSide(ctx, sf, stderr)
	if err != nil {
		return err
	}
	defer rs.Close()
	deps, err := withSteps(readSideDeps(rs), getenv)
	if err != nil {
		return err
	}
	// A rebuild's heap is mostly a few chunks of decoded bookings (under 100 MB live at 1,000,000
	// events), garbage once each chunk is written: collecting a third as often saves about a sixth of
	// the process's CPU, and the soft limit keeps the peak under the 400 MB a rebuild may take
	// whatever the log's size (docs/benchmarks-history.md, "Indexes built after the load, and the
	// rebuild's GC"). An operator's GOGC or GOMEMLIMIT wins.
	if getenv("GOGC") == "" && getenv("GOMEMLIMIT") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(300))
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(300 << 20))
	}
	if !*quiet {
		// The write after a calendar replay takes minutes on a log of millions of events: each of its
		// phases is told as it ends, not only in the result's phases line.
		rs.OnPhase = func(phase string, took time.Duration) {
			fmt.Fprintf(stderr, "rebuild %s: %s done in %.1fs\n", readmodel.ProjectionName, phase, took.Seconds())
		}
	}
	for _, entry := range entries {
		if err := rebuildProjection(ctx, deps, entry, *quiet, stdout, stderr); err != nil {
			return err
		}
		if len(rs.Phases) > 0 {
			// Where the write's time went (the rest of the wall time is reading the log into the replay).
			fmt.Fprintf(stdout, "phases: %s\n", strings.Join(rs.Phases, ", "))
			rs.Phases = nil
		}
	}
	return nil
}

// rebuildAll names every projection to rebuild.
const rebuildAll = "all"

// rebuildProjection rebuilds e's projection and prints the result.
func rebuildProjection(ctx context.Context, d projectionDeps, e projectionEntry, quiet bool, stdout, stderr io.Writer) error {
	name := e.name
	runner, err := d.runner(e, projections.RunnerOptions{BatchSize: e.rebuildBatch})
	if err != nil {
		return err
	}
	var progress func(projections.Progress)
	var bar *cmdline.ProgressBar
	if !quiet {
		bar = cmdline.NewProgressBar(stderr, "rebuild "+name)
		if e.bulk != nil {
			// Only a bulk load (the calendar's) has work left once the replay reached the total.
			bar.AfterReplay = "writing the read model and syncing the reconciliation queue"
		}
		progress = bar.Update
	}
	start := time.Now()
	err = runner.Rebuild(ctx, progress)
	if bar != nil {
		bar.Finish()
	}
	switch {
	case errors.Is(err, projections.ErrBusy):
		return fmt.Errorf("rebuild %s: a running 'bookingledger serve' holds the projection's lock on this database; "+
			"stop every serve process first, then run rebuild again: %w", name, err)
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("rebuild %s interrupted: the read model is partly rebuilt; the next serve or rebuild finishes it: %w", name, err)
	case err != nil:
		return fmt.Errorf("rebuild %s: %w", name, err)
	}
	elapsed := time.Since(start)
	cp, err := checkpoint.Read(ctx, d.pool, name)
	if err != nil {
		return fmt.Errorf("rebuild %s: done, but reading its checkpoint failed: %w", name, err)
	}
	rate := float64(cp.EventsApplied) / max(elapsed.Seconds(), 1e-9)
	_, err = fmt.Fprintf(stdout, "rebuilt %s: %d events in %s (%.0f events/s), checkpoint %s\n",
		name, cp.EventsApplied, elapsed.Round(time.Millisecond), rate, cp.Position)
	return err
}
