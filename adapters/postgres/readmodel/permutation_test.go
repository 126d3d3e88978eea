package readmodel_test

import (
	"time"

	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/privacy"
	"bookingledger/domain/booking"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

// TestConvergenceUnderAnyArrival records generated scenarios in many random orders, with duplicates,
// into fresh databases, projecting at random points with random batch sizes. Every run must show the
// same calendar, bookings, payment links and open reconciliation items; and a rebuild of each run
// must equal its incremental result. BOOKINGLEDGER_PERMUTATIONS sets the orders per scenario.
func TestConvergenceUnderAnyArrival(t *testing.T) {
	t.Parallel()
	orders := 4
	if testing.Short() {
		orders = 2
	}
	if v, err := strconv.Atoi(os.Getenv("BOOKINGLEDGER_PERMUTATIONS")); err == nil && v > 0 {
		orders = v
	}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			ds := genScenario(seed)
			got := runsInParallel(t, orders, func(t *testing.T, run int) snapshot {
				r := rand.New(rand.NewPCG(seed, uint64(run)))
				return recordAndProject(t, r, arrival(r, ds))
			})
			want := got[0]
			requireRichScenario(t, want)
			for run := 1; run < orders; run++ {
				if !assert.Equal(t, want, got[run], "seed %d run %d differs from run 0", seed, run) {
					return
				}
			}
		})
	}
}

func recordAndProject(t *testing.T, r *rand.Rand, ds []delivery) snapshot {
	t.Helper()
	e := newEnv(t)
	ctx := context.Background()
	for _, d := range ds {
		e.deliver(t, d)
		if r.IntN(4) == 0 {
			// One pass with a random batch size: it applies whatever the log shows by now.
			_, err := e.rm.Pass(projections.RunnerOptions{BatchSize: 1 + r.IntN(6)}).CatchUp(ctx)
			require.NoError(t, err)
		}
	}
	e.catchUp(t)
	incremental := snapshotOf(t, e)
	require.NoError(t, e.rm.Rebuild(ctx, nil))
	require.Equal(t, incremental, snapshotOf(t, e), "rebuild differs from incremental")
	// In chunks as small as the connected sets allow, or a few bookings at least; from the events
	// the runner reads and hands over, where e.rm has the store copy them (Options.Log); and with the
	// staging tables indexed after the load, as a large replay is, where e.rm indexes this small one
	// first.
	chunked := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{Links: eventcodec.JSON{}, Texts: privacy.NewTexts(e.pool),
		RebuildChunk: 1 + r.IntN(4), IndexFirstUpTo: -1})
	require.NoError(t, chunked.Rebuild(ctx, nil))
	require.Equal(t, incremental, snapshotOf(t, e), "rebuild in chunks differs from incremental")
	// As a first run over the log computes it — no conflict or late-event item stored yet — with the
	// guard's horizon somewhere among the scenario's slots or two months after them (the scenarios'
	// series span weeks): the fold computes the lone bookings whose claims end before it, and the
	// chunks the others (lone.go).
	_, err := e.pool.Exec(ctx, `DELETE FROM reconciliation_items WHERE kind IN ('conflict', 'late_event')`)
	require.NoError(t, err)
	lone := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{Links: eventcodec.JSON{}, Texts: privacy.NewTexts(e.pool),
		RebuildChunk: 1 + r.IntN(4), IndexFirstUpTo: int64(-1 + r.IntN(2)*1000)})
	horizon := day.AddDate(0, 0, 60)
	if r.IntN(2) == 0 {
		horizon = day.Add(time.Duration(r.IntN(8*24)-3*24) * time.Hour)
	}
	readmodel.SetGuardHorizon(lone, horizon)
	readmodel.SetReplayBatch(lone, 1+r.IntN(3)) // a series' occurrences, or a reschedule's two sides, in different batches
	require.NoError(t, lone.Rebuild(ctx, nil))
	require.Equal(t, incremental, snapshotOf(t, e), "rebuild with lone bookings differs from incremental")
	return incremental
}

// requireRichScenario keeps the comparison from passing vacuously: the scenario must exercise every
// status, payments and both kinds of derived items.
func requireRichScenario(t *testing.T, s snapshot) {
	t.Helper()
	seen := map[calendar.Status]bool{}
	pay := map[booking.PaymentStatus]bool{}
	implied, links := false, 0
	for _, b := range s.Bookings {
		seen[b.Status] = true
		pay[b.Payment] = true
		implied = implied || b.CancelImplied
		if b.RescheduledFrom != "" {
			links++
		}
	}
	for _, st := range []calendar.Status{calendar.StatusActive, calendar.StatusCanceled, calendar.StatusConflict, calendar.StatusRejected} {
		require.True(t, seen[st], "scenario has no %s booking", st)
	}
	require.True(t, pay[booking.PaymentIsPaid] || pay[booking.PaymentIsRefunded], "scenario has no payment")
	require.True(t, implied, "scenario has no implied cancel")
	require.GreaterOrEqual(t, links, 3, "scenario has too few reschedules")
	kinds := map[string]bool{}
	for _, o := range s.Open {
		kinds[o[:len("conflict")]] = true
	}
	require.True(t, kinds["conflict"], "scenario has no open conflict")
	require.True(t, kinds["late_eve"], "scenario has no refused late event")
	require.NotEmpty(t, s.Payments)
}
