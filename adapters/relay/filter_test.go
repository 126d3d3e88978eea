package relay_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
	"bookingledger/domain/resource"
)

// onResource moves a scheduled event's slot to provider resource id.
func onResource(ev booking.Event, id string) booking.Event {
	p := ev.Payload.(booking.Scheduled)
	p.Slot.Resources = []string{id}
	ev.Payload = p
	return ev
}

// got lists what rc received as "type booking", sorted.
func got(rc *receiver) []string {
	var out []string
	for _, m := range rc.messages() {
		out = append(out, m.msg.Type+" "+m.msg.Data.Booking)
	}
	slices.Sort(out)
	return out
}

// Filters select by provider, by resource (a linked resource's name or a provider resource) and by
// the booking's status after the event, every term at once; a change applies to the events recorded
// after it, and a replay narrows by the filter in force.
func TestFiltersSelectByProviderResourceAndStatusAndAChangeAppliesAfterIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}})
	ctx := context.Background()
	from := time.Now().Add(-time.Minute)
	_, err := resource.NewService(e.store, eventcodec.JSON{}).Link(ctx, "room-a", []string{"host-2"}, "test", time.Now())
	require.NoError(t, err)
	add := func(rc *receiver, types []string, filter string) relay.Endpoint {
		f, err := relay.ParseFilter(filter)
		require.NoError(t, err)
		ep, secret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url(), Types: types, Filter: f})
		require.NoError(t, err)
		rc.setSecrets(secret)
		assert.Equal(t, f.String(), ep.Filter.String())
		return ep
	}
	status, room, acuity, all := newReceiver(t), newReceiver(t), newReceiver(t), newReceiver(t)
	epStatus := add(status, nil, "status=canceled")
	add(room, []string{"booking.*"}, "resource=room-a,provider=calendly")
	epAcuity := add(acuity, nil, "provider=acuity")
	epAll := all.endpointOn(t, r)

	e.record(t, "f-1", e.scheduled("f-1", 9))
	e.record(t, "f-2", onResource(e.scheduled("f-2", 10), "host-2"))
	e.record(t, "f-1c", e.canceled("f-1"))
	// The fan-out plans an event for every endpoint in one transaction: once the unfiltered endpoint
	// has its deliveries, every other endpoint has whatever it takes of these events.
	eventually(t, 30*time.Second, "the unfiltered endpoint's 3", func() bool { return len(deliveriesIn(t, r, epAll.ID, relay.StateSucceeded)) == 3 })
	eventually(t, 30*time.Second, "the filtered ones'", func() bool { return len(status.messages()) == 1 && len(room.messages()) == 1 })
	assert.Equal(t, []string{"booking.canceled.v1 f-1"}, got(status), "status after the event: canceled")
	assert.Equal(t, []string{"booking.scheduled.v1 f-2"}, got(room), "host-2 is linked to room-a")
	assert.Empty(t, deliveriesIn(t, r, epAcuity.ID, ""), "no event of provider acuity")

	active, err := relay.ParseFilter("status=active")
	require.NoError(t, err)
	ep, err := r.UpdateEndpoint(ctx, epStatus.ID, relay.EndpointUpdate{Filter: &active})
	require.NoError(t, err)
	assert.Equal(t, "status=active", ep.Filter.String())
	e.record(t, "f-3", e.scheduled("f-3", 11))
	e.record(t, "f-2c", e.canceled("f-2"))
	eventually(t, 30*time.Second, "the unfiltered endpoint's 5", func() bool { return len(deliveriesIn(t, r, epAll.ID, relay.StateSucceeded)) == 5 })
	eventually(t, 30*time.Second, "the filtered ones'", func() bool { return len(status.messages()) == 2 && len(room.messages()) == 2 })
	// A message arrives before its attempt commits: the replay below selects succeeded deliveries.
	eventually(t, 30*time.Second, "the filtered endpoint's 2 recorded", func() bool {
		return len(deliveriesIn(t, r, epStatus.ID, relay.StateSucceeded)) == 2
	})
	assert.Equal(t, []string{"booking.canceled.v1 f-1", "booking.scheduled.v1 f-3"}, got(status),
		"the new filter takes the events recorded after the change only")
	assert.Equal(t, []string{"booking.canceled.v1 f-2", "booking.scheduled.v1 f-2"}, got(room))
	assert.Empty(t, deliveriesIn(t, r, epAcuity.ID, ""))

	// A replay of the whole window sends what the endpoint takes now: the three creates (two by
	// backfill, f-3's again), not f-1's cancel it received under the old filter.
	plan, err := r.PlanReplay(ctx, relay.ReplayQuery{EndpointID: epStatus.ID, From: from, To: time.Now().Add(time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, 3, plan.Total)
	assert.Equal(t, []relay.TypeCount{{Type: "booking.scheduled.v1", Count: 3}}, plan.ByType)

	_, err = r.UpdateEndpoint(ctx, epStatus.ID, relay.EndpointUpdate{Filter: &relay.Filter{Statuses: []string{"scheduled"}}})
	assert.ErrorIs(t, err, relay.ErrInvalidFilter)
	_, _, err = r.AddEndpoint(ctx, relay.NewEndpoint{URL: all.url(), Filter: relay.Filter{Providers: []string{"Cal.com"}}})
	assert.ErrorIs(t, err, relay.ErrInvalidFilter)
}
