package stepstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/pgtest/plantest"
	"bookingledger/adapters/process"
)

// stepCounts counts process_steps the way the gauge did before migration 0760, by reading every row:
// the truth Counts must tell.
func stepCounts(t *testing.T, pool *pgxpool.Pool) map[process.Kind]map[process.State]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT kind, state, count(*) FROM process_steps GROUP BY kind, state`)
	require.NoError(t, err)
	out := map[process.Kind]map[process.State]int64{}
	for rows.Next() {
		var k, st string
		var n int64
		require.NoError(t, rows.Scan(&k, &st, &n))
		if out[process.Kind(k)] == nil {
			out[process.Kind(k)] = map[process.State]int64{}
		}
		out[process.Kind(k)][process.State(st)] = n
	}
	require.NoError(t, rows.Err())
	return out
}

func finishRows(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM process_step_finishes`).Scan(&n))
	return n
}

// TestCountsFollowEveryChangeOfState: whatever moves a step — planned pending or skipped, claimed,
// finished, failed and retried, resolved, reopened, deleted, the table truncated — Counts tells what
// a count of every row tells, before and after its rows of finished steps are folded; a fold waits
// until more than its bound piled up and leaves one row per kind and state.
func TestCountsFollowEveryChangeOfState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	store := NewStore(w.pool, nil)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := w.pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	check := func(what string) {
		t.Helper()
		got, err := store.Counts(ctx)
		require.NoError(t, err, what)
		require.Equal(t, stepCounts(t, w.pool), got, what)
		_, err = FoldFinishes(ctx, w.pool, 4)
		require.NoError(t, err, what)
		got, err = store.Counts(ctx)
		require.NoError(t, err, what)
		require.Equal(t, stepCounts(t, w.pool), got, what+", folded past 4 rows")
	}
	create := insertStep(t, w, "calendly-a", "calendly-a", process.CalendarCreate, process.StatePending)
	email := insertStep(t, w, "calendly-a", "calendly-a", process.EmailConfirmation, process.StatePending)
	skipped := insertStep(t, w, "calendly-b", "calendly-b", process.EmailConfirmation, process.StateSkipped)
	done := insertStep(t, w, "calendly-c", "calendly-c", process.CalendarCreate, process.StateDone)
	check("planned")
	exec(`UPDATE process_steps SET state = 'requested', attempts = attempts + 1 WHERE id = ANY($1)`, []int64{create, email})
	check("claimed")
	exec(`UPDATE process_steps SET state = 'done', finished_at = now() WHERE id = $1`, create)
	exec(`UPDATE process_steps SET state = 'failed', finished_at = now() WHERE id = $1`, email)
	check("finished and failed")
	exec(`UPDATE process_steps SET target_etag = '"e2"', updated_at = now() WHERE id = $1`, create) // not a change of state
	exec(`UPDATE process_steps SET state = 'pending', finished_at = NULL WHERE id = $1`, email)     // an operator's retry
	check("retried")
	exec(`UPDATE process_steps SET state = 'requested' WHERE id = $1`, email)
	exec(`UPDATE process_steps SET state = 'needs_reconciliation' WHERE id = $1`, email)
	check("unknown")
	exec(`UPDATE process_steps SET state = 'done' WHERE id = $1`, email) // marked done
	exec(`UPDATE process_steps SET state = 'pending' WHERE id = $1`, skipped)
	exec(`UPDATE process_steps SET state = 'skipped' WHERE id = $1`, skipped) // reopened, then erased
	exec(`UPDATE process_steps SET state = 'failed' WHERE id = $1`, skipped)
	check("resolved and reopened")
	require.LessOrEqual(t, finishRows(t, w.pool), int64(4), "folded once more than four rows piled up")
	before := finishRows(t, w.pool)
	folded, err := FoldFinishes(ctx, w.pool, before)
	require.NoError(t, err)
	require.Zero(t, folded, "not past the bound")
	require.Equal(t, before, finishRows(t, w.pool))
	exec(`DELETE FROM process_steps WHERE id = $1`, done)
	check("deleted")
	got, err := store.Counts(ctx)
	require.NoError(t, err)
	var pairs int64
	for _, states := range got {
		for st := range states {
			if st == process.StateDone || st == process.StateFailed || st == process.StateSkipped {
				pairs++
			}
		}
	}
	folded, err = FoldFinishes(ctx, w.pool, 0)
	require.NoError(t, err)
	assert.Positive(t, folded)
	check("folded")
	assert.Equal(t, pairs, finishRows(t, w.pool), "a row per finished kind and state")
	exec(`TRUNCATE process_steps CASCADE`)
	check("truncated")
	assert.Zero(t, finishRows(t, w.pool))
}

// TestCountsStayExactUnderConcurrentChanges: workers finish, fail, retry and skip steps in concurrent
// transactions (some rolled back) while two sweepers fold the finished steps' rows, often, and a scrape
// counts; at the end Counts tells what a count of every row tells.
func TestCountsStayExactUnderConcurrentChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	const workers, perWorker = 8, 40
	ids := make([][]int64, workers)
	for i := range workers {
		for j := range perWorker {
			kind := process.Kinds[(i+j)%len(process.Kinds)]
			ids[i] = append(ids[i], insertStep(t, w, fmt.Sprintf("calendly-w%d-%d", i, j), fmt.Sprintf("calendly-w%d-%d", i, j), kind, process.StatePending))
		}
	}
	next := map[process.State][]process.State{
		process.StatePending:             {process.StateRequested, process.StateSkipped},
		process.StateRequested:           {process.StateDone, process.StateFailed, process.StateNeedsReconciliation, process.StatePending},
		process.StateNeedsReconciliation: {process.StateDone, process.StateSkipped, process.StatePending},
		process.StateFailed:              {process.StatePending, process.StateSkipped, process.StateDone},
		process.StateSkipped:             {process.StatePending},
		process.StateDone:                {process.StateDone},
	}
	var (
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		scrapes sync.WaitGroup
		folds   = make(chan int64, 1000)
	)
	for s := range 2 {
		scrapes.Add(1)
		go func() {
			defer scrapes.Done()
			store := NewStore(w.pool, nil)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := FoldFinishes(ctx, w.pool, int64(3+s)); err != nil {
					t.Error(err)
					return
				}
				if _, err := store.Counts(ctx); err != nil {
					t.Error(err)
					return
				}
				var rows int64
				if err := w.pool.QueryRow(ctx, `SELECT count(*) FROM process_step_finishes`).Scan(&rows); err == nil {
					folds <- rows
				}
			}
		}()
	}
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 33))
			for range 120 {
				id := ids[i][rng.IntN(perWorker)]
				err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
					var st string
					if err := tx.QueryRow(ctx, `SELECT state FROM process_steps WHERE id = $1 FOR UPDATE`, id).Scan(&st); err != nil {
						return err
					}
					choices := next[process.State(st)]
					to := choices[rng.IntN(len(choices))]
					if _, err := tx.Exec(ctx, `UPDATE process_steps SET state = $2, updated_at = now() WHERE id = $1`, id, string(to)); err != nil {
						return err
					}
					if rng.IntN(5) == 0 {
						return errRolledBack
					}
					return nil
				})
				if err != nil && !errors.Is(err, errRolledBack) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	scrapes.Wait()
	close(folds)
	var most int64
	for n := range folds {
		most = max(most, n)
	}
	got, err := NewStore(w.pool, nil).Counts(ctx)
	require.NoError(t, err)
	require.Equal(t, stepCounts(t, w.pool), got)
	assert.Less(t, most, int64(200), "the sweepers folded the rows as they piled up")
}

var errRolledBack = errors.New("rolled back on purpose")

// TestCountsReadNoFinishedStep: the steps gauge's read takes the open steps by their index and the
// finished ones from their sums, never process_steps whole — on a database whose tables were analyzed
// empty (a plan a connection keeps as the table grows) and on one with thousands of finished steps.
func TestCountsReadNoFinishedStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	trace := &plantest.Trace{Naming: []string{"process_steps"}}
	url := pgtest.NewDatabaseURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = trace
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, state)
SELECT gen_random_uuid(), 'host_calendar.create', 'calendly-fill-' || n, 'calendly-fill-' || n, 'active', 'done'
FROM generate_series(1, 5000) n;
INSERT INTO process_steps (key, kind, thread, booking, answers, state) VALUES
    (gen_random_uuid(), 'invitee_email.confirmation', 'calendly-open', 'calendly-open', 'active', 'pending');
ANALYZE process_steps`)
	require.NoError(t, err)

	store := NewStore(pool, nil)
	trace.On.Store(true)
	got, err := store.Counts(ctx)
	trace.On.Store(false)
	require.NoError(t, err)
	assert.Equal(t, map[process.Kind]map[process.State]int64{
		process.CalendarCreate:    {process.StateDone: 5000},
		process.EmailConfirmation: {process.StatePending: 1},
	}, got)

	settings := trace.Settings()
	require.Contains(t, settings, "enable_seqscan = off")
	require.Len(t, trace.Statements(), 1)
	emptied := pgtest.NewDatabaseURL(t)
	_, err = plantest.Connect(t, emptied).Exec(ctx, `ANALYZE process_steps`)
	require.NoError(t, err)
	rule := plantest.Rule{Watched: []string{"process_steps"}}
	for _, db := range []struct{ name, url string }{{"empty", emptied}, {"filled", url}} {
		conn := plantest.Connect(t, db.url, settings...)
		for _, s := range trace.Statements() {
			rule.Check(t, conn, fmt.Sprintf("%s database (settings %v)", db.name, settings), s, plantest.Custom, plantest.Kept)
		}
	}
}

// TestListReadsOpenAndFailedStepsByTheirIndexes: listing the steps in an open state or the failed
// ones reads the partial index of those states, never the finished history, on a database with
// thousands of finished steps, and lists them newest first. The failed steps' listing — the inbox's,
// at every load, on serve's long-lived connections — keeps to its index on a database whose tables
// were analyzed empty too; an open state's listing there walks the primary key backwards, planned for
// a table of a page, and is only ever `steps --state`, a process of its own that plans afresh.
func TestListReadsOpenAndFailedStepsByTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	trace := &plantest.Trace{Naming: []string{"process_steps"}, Max: 8}
	url := pgtest.NewDatabaseURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = trace
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, state)
SELECT gen_random_uuid(), 'host_calendar.create', 'calendly-fill-' || n, 'calendly-fill-' || n, 'active',
    CASE WHEN n % 1000 = 0 THEN 'failed' WHEN n % 1000 = 1 THEN 'pending' ELSE 'done' END
FROM generate_series(1, 5000) n;
ANALYZE process_steps`)
	require.NoError(t, err)

	store := NewStore(pool, nil)
	open := []process.State{process.StatePending, process.StateRequested, process.StateNeedsReconciliation, process.StateFailed}
	want := map[process.State][]int64{}
	for _, st := range open {
		var ids []int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(array_agg(id ORDER BY id DESC), '{}') FROM process_steps WHERE state = $1`, string(st)).Scan(&ids))
		want[st] = ids
	}
	trace.On.Store(true)
	for _, st := range open {
		got, err := store.List(ctx, st)
		require.NoError(t, err)
		assert.Equal(t, want[st], stepIDs(got), st)
		for _, s := range got {
			assert.Equal(t, st, s.State)
		}
	}
	trace.On.Store(false)
	failed, err := store.List(ctx, process.StateFailed)
	require.NoError(t, err)
	require.Len(t, failed, 5)

	settings := trace.Settings()
	require.Contains(t, settings, "enable_seqscan = off")
	require.Len(t, trace.Statements(), len(open), "a statement per state")
	emptied := pgtest.NewDatabaseURL(t)
	_, err = plantest.Connect(t, emptied).Exec(ctx, `ANALYZE process_steps`)
	require.NoError(t, err)
	rule := plantest.Rule{Watched: []string{"process_steps"}}
	for _, db := range []struct{ name, url string }{{"empty", emptied}, {"filled", url}} {
		conn := plantest.Connect(t, db.url, settings...)
		for _, s := range trace.Statements() {
			if db.name == "empty" && !strings.Contains(s.SQL, "'failed'") {
				continue
			}
			rule.Check(t, conn, fmt.Sprintf("%s database (settings %v)", db.name, settings), s, plantest.Custom, plantest.Kept)
		}
	}
}
