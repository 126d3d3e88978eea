package readmodel_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/domain/booking"
	"bookingledger/domain/resource"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

// One host takes intro calls through Calendly and treatments through Acuity: two provider resources.
const (
	drSmithCalendly = "https://api.calendly.com/users/DRSMITH"
	drSmithAcuity   = "acuity-calendar-77"
)

var (
	introCall = created("calendly-intro", at(-48, 0), slot("https://api.calendly.com/scheduled_events/E1", at(10, 0), 30, drSmithCalendly))
	treatment = created("acuity-1001", at(-47, 0), slot("acuity-1001", at(10, 15), 45, drSmithAcuity))
)

func (e *env) links() *resource.Service { return resource.NewService(e.store, eventcodec.JSON{}) }

func (e *env) link(t testing.TB, name string, ids ...string) {
	t.Helper()
	evs, err := e.links().Link(context.Background(), name, ids, "tester", day.AddDate(0, 0, -1))
	require.NoError(t, err)
	require.Len(t, evs, 1, "one link event appended")
}

func (e *env) unlink(t testing.TB, name string, ids ...string) {
	t.Helper()
	evs, err := e.links().Unlink(context.Background(), name, ids, "tester", day.AddDate(0, 0, -1))
	require.NoError(t, err)
	require.Len(t, evs, 1, "one unlink event appended")
}

func (e *env) calendarOf(t testing.TB, res string) []calendar.CalendarEntry {
	t.Helper()
	page, err := e.rm.Calendar(context.Background(), calendar.CalendarQuery{From: day, To: day.AddDate(0, 0, 1), Resource: res})
	require.NoError(t, err)
	return page.Entries
}

func TestLinkedResourcesGuardAcrossProviders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.deliver(t, one("d-intro", introCall))
	e.deliver(t, one("d-treatment", treatment))
	e.catchUp(t)

	// Unlinked, the two calendars are never compared.
	assert.Equal(t, calendar.StatusActive, e.booking(t, "calendly-intro").Status)
	assert.Equal(t, calendar.StatusActive, e.booking(t, "acuity-1001").Status)
	assert.Equal(t, []string{"acuity-1001", "calendly-intro"}, e.holders(t))
	assert.Empty(t, e.openItems(t))
	assert.Equal(t, []string{drSmithAcuity}, e.booking(t, "acuity-1001").Canonical, "an unlinked resource is its own canonical resource")

	// Linked, they are one calendar: the earlier-scheduled intro call holds, the treatment conflicts.
	e.link(t, "dr-smith", drSmithCalendly, drSmithAcuity)
	e.catchUp(t)
	intro, treat := e.booking(t, "calendly-intro"), e.booking(t, "acuity-1001")
	assert.Equal(t, calendar.StatusActive, intro.Status)
	assert.True(t, intro.Holder)
	assert.Equal(t, calendar.StatusConflict, treat.Status)
	assert.Equal(t, []string{"dr-smith"}, treat.Canonical)
	assert.Equal(t, []string{drSmithAcuity}, treat.Resources, "the provider's identifier is kept")
	assert.Equal(t, []string{"calendly-intro"}, e.holders(t))
	items := e.openItems(t)
	require.Len(t, items, 1)
	assert.Equal(t, calendar.ItemConflict, items[0].Kind)
	assert.Equal(t, "acuity-1001 calendly-intro", items[0].Subject)
	assert.Contains(t, items[0].Reason, "on dr-smith")
	assert.Equal(t, []string{"dr-smith calendly-intro", "dr-smith acuity-1001"}, slotRows(t, e))

	// The calendar shows both identifiers, and --resource takes either.
	both := e.calendarOf(t, "dr-smith")
	require.Len(t, both, 2)
	for _, en := range both {
		assert.Equal(t, "dr-smith", en.Canonical)
	}
	acuityOnly := e.calendarOf(t, drSmithAcuity)
	require.Len(t, acuityOnly, 1)
	assert.Equal(t, booking.ID("acuity-1001"), acuityOnly[0].Booking)
	assert.Equal(t, drSmithAcuity, acuityOnly[0].Resource)
	assert.Equal(t, "dr-smith", acuityOnly[0].Canonical)

	// The database refuses a second holder on the canonical resource, whatever the code does.
	_, err := e.pool.Exec(ctx, `UPDATE calendar_slots SET holder = true WHERE booking = 'acuity-1001'`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "calendar_slots_no_double_booking")

	// Unlinked again: both hold their own calendar and the item closes itself.
	e.unlink(t, "dr-smith", drSmithAcuity)
	e.catchUp(t)
	assert.Equal(t, calendar.StatusActive, e.booking(t, "acuity-1001").Status)
	assert.Equal(t, []string{"acuity-1001", "calendly-intro"}, e.holders(t))
	assert.Empty(t, e.openItems(t))
	all, err := e.rm.Items(ctx, "acuity-1001")
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, calendar.ClosedByAuto, all[0].ClosedBy)
	assert.Equal(t, []string{"dr-smith calendly-intro", drSmithAcuity + " acuity-1001"}, slotRows(t, e))
}

// slotRows lists the slot table's (resource, booking) rows by booking's scheduled order.
func slotRows(t testing.TB, e *env) []string {
	t.Helper()
	return queryStrings(t, e, `SELECT resource || ' ' || booking FROM calendar_slots ORDER BY priority_at`)
}

// Every order of the two deliveries and the two links (one per provider resource) ends in the same
// calendar, slot table and items as the order where everything arrived before the projection ran.
func TestLinksAndDeliveriesConvergeInAnyOrder(t *testing.T) {
	t.Parallel()
	type step struct {
		name string
		do   func(t testing.TB, e *env)
	}
	steps := []step{
		{"intro", func(t testing.TB, e *env) { e.deliver(t, one("d-intro", introCall)) }},
		{"treatment", func(t testing.TB, e *env) { e.deliver(t, one("d-treatment", treatment)) }},
		{"link calendly", func(t testing.TB, e *env) { e.link(t, "dr-smith", drSmithCalendly) }},
		{"link acuity", func(t testing.TB, e *env) { e.link(t, "dr-smith", drSmithAcuity) }},
	}
	ref := newEnv(t)
	for _, s := range steps {
		s.do(t, ref)
	}
	ref.catchUp(t)
	want := snapshotOf(t, ref)
	require.Len(t, want.Open, 1, "the reference has the cross-provider conflict")
	require.Equal(t, []string{drSmithAcuity + " -> dr-smith", drSmithCalendly + " -> dr-smith"}, want.Links)

	for _, order := range permutations(len(steps)) {
		var names []string
		for _, i := range order {
			names = append(names, steps[i].name)
		}
		t.Run(fmt.Sprint(names), func(t *testing.T) {
			t.Parallel() // each order on a database of its own; want is only read
			e := newEnv(t)
			for _, i := range order {
				steps[i].do(t, e)
				e.catchUp(t) // the projection sees every intermediate state
			}
			assert.Equal(t, want, snapshotOf(t, e))
		})
	}
}

func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// A log with links, an unlink and a relink rebuilds into the rows the incremental projection has,
// whether the rebuild computes the calendar in one chunk or one booking at a time.
func TestRebuildEqualsIncrementalWithLinks(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		chunk  int
		copied bool // the replay copied by the store (Options.Log), not read and handed over
	}{{"one chunk", 0, false}, {"chunks of one booking", 1, false}, {"copied by the store", 0, true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // on a database of its own
			kind := eventlogtest.SelectedStore(t)
			if c.copied {
				kind = eventlogtest.StorePostgres // the store that copies
			}
			e := newEnvOn(t, kind)
			ctx := context.Background()
			e.deliver(t, one("d-intro", introCall))
			e.catchUp(t)
			e.link(t, "dr-smith", drSmithCalendly, drSmithAcuity)
			e.catchUp(t)
			e.deliver(t, one("d-treatment", treatment))
			e.catchUp(t)
			e.unlink(t, "dr-smith", drSmithCalendly)
			e.catchUp(t)
			// Cal.com, a third provider, joins; the Calendly user comes back.
			e.deliver(t, one("d-calcom", created("calcom-uid9", at(-46, 0), slot("calcom-uid9", at(10, 45), 30, "calcom-user-12"))))
			e.link(t, "dr-smith", drSmithCalendly, "calcom-user-12")
			e.catchUp(t)
			incremental := snapshotOf(t, e)
			require.Len(t, incremental.Open, 2, "treatment loses to the intro call, Cal.com to the treatment")
			require.Len(t, incremental.Links, 3)

			opts := readmodel.Options{Links: eventcodec.JSON{}, RebuildChunk: c.chunk}
			if c.copied {
				require.NotNil(t, e.log())
				opts.Log = e.log()
			}
			rm := readmodel.New(e.pool, e.store, eventcodec.JSON{}, opts)
			require.NoError(t, rm.Rebuild(ctx, nil))
			assert.Equal(t, incremental, snapshotOf(t, e), "rebuilt rows differ from incremental ones")
		})
	}
}

func TestLinkEventWithoutCodecFailsLoudly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.link(t, "dr-smith", drSmithCalendly)
	rm := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{})
	e.waitReadable(t)
	_, err := rm.Runner(projections.RunnerOptions{}).CatchUp(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no link codec")
}
