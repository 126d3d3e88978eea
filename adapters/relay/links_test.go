package relay_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/relay"
	"bookingledger/domain/resource"
)

// The calendar's link events are ledger events too: an endpoint taking their types gets each once,
// signed, with the link stream, its version and the links after the event; one taking booking types
// only does not, and a window replay backfills them to an endpoint added later.
func TestLinkEventsAreDeliveredWithTheLinksAfterThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}})
	ctx := context.Background()
	from := time.Now().Add(-time.Minute)
	links, bookings := newReceiver(t), newReceiver(t)
	ep, secret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: links.url(), Types: []string{"resource.*"}})
	require.NoError(t, err)
	links.setSecrets(secret)
	bep, bsecret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: bookings.url(), Types: []string{"booking.*"}})
	require.NoError(t, err)
	bookings.setSecrets(bsecret)

	svc := resource.NewService(e.store, eventcodec.JSON{})
	_, err = svc.Link(ctx, "alice", []string{"calendly:u1", "calcom:7"}, "test", time.Now())
	require.NoError(t, err)
	_, err = svc.Unlink(ctx, "alice", []string{"calcom:7"}, "test", time.Now())
	require.NoError(t, err)
	e.record(t, "links-b", e.scheduled("calendly-links-b", 9))
	eventually(t, 30*time.Second, "both link events", func() bool { return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == 2 })
	eventually(t, 30*time.Second, "the booking event", func() bool { return len(deliveriesIn(t, r, bep.ID, relay.StateSucceeded)) == 1 })
	time.Sleep(200 * time.Millisecond)

	_, evs, err := svc.Load(ctx)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	got := links.messages()
	require.Len(t, got, 2)
	byVersion := map[uint64]received{}
	for _, m := range got {
		byVersion[m.msg.Data.Version] = m
	}
	want := []struct {
		typ   resource.EventType
		links map[string]string
	}{
		{resource.TypeLinked, map[string]string{"calendly:u1": "alice", "calcom:7": "alice"}},
		{resource.TypeUnlinked, map[string]string{"calendly:u1": "alice"}},
	}
	for i, w := range want {
		m, ok := byVersion[uint64(i+1)]
		require.True(t, ok, "version %d delivered", i+1)
		assert.Equal(t, relay.WebhookID(evs[i].ID), m.id)
		assert.Equal(t, string(w.typ), m.msg.Type)
		assert.Equal(t, resource.Stream, m.msg.Data.Stream)
		assert.Empty(t, m.msg.Data.Booking)
		assert.Equal(t, evs[i].ID.String(), m.msg.Data.Event.ID)
		assert.Equal(t, string(w.typ), m.msg.Data.Event.Type)
		assert.WithinDuration(t, evs[i].At, m.msg.Data.Event.OccurredAt, time.Microsecond, "occurred_at is when the link was made")
		require.NotNil(t, m.msg.Data.Links, "the state is the links: %s", m.body)
		assert.Equal(t, w.links, m.msg.Data.Links.Links)
		assert.Equal(t, i+1, m.msg.Data.Links.Events)
		var payload struct {
			Name      string   `json:"name"`
			Resources []string `json:"resources"`
		}
		require.NoError(t, json.Unmarshal(m.msg.Data.Event.Payload, &payload))
		assert.Equal(t, "alice", payload.Name)
		var wire struct {
			Data struct {
				State struct {
					Links map[string]string `json:"links"`
				} `json:"state"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(m.body, &wire))
		assert.Equal(t, w.links, wire.Data.State.Links, "the links are the message's data.state")
	}
	for _, d := range deliveriesIn(t, r, ep.ID, "") {
		assert.Equal(t, resource.Stream, d.Stream)
		assert.Empty(t, d.Booking)
	}
	bgot := bookings.messages()
	require.Len(t, bgot, 1, "an endpoint of booking types gets no link event")
	assert.Equal(t, "booking.scheduled.v1", bgot[0].msg.Type)
	assert.Equal(t, "active", bgot[0].msg.Data.State.Status)
	assert.Nil(t, bgot[0].msg.Data.Links)

	late := newReceiver(t)
	lep, lsecret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: late.url(), Types: []string{"resource.linked.*"}})
	require.NoError(t, err)
	late.setSecrets(lsecret)
	q := relay.ReplayQuery{EndpointID: lep.ID, From: from, To: time.Now().Add(time.Minute)}
	plan, err := r.PlanReplay(ctx, q)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"resource.linked.v1": 1}, planCounts(plan))
	_, _, sent := replayAndWait(t, r, late, q)
	require.Len(t, sent, 1)
	assert.Equal(t, relay.WebhookID(evs[0].ID), sent[0].id)
	assert.Equal(t, byVersion[1].body, sent[0].body, "the same message as the fan-out's")
	assert.Empty(t, links.invalidMessages())
	assert.Empty(t, late.invalidMessages())
}
