package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/metricstest"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/providers/standard"
	"bookingledger/adapters/relay"
)

// disable stops a delivery already planned: waiting for its retry when the endpoint is disabled, it
// pauses when its turn comes and nothing more is sent (a replay of the endpoint is refused). enable
// resumes it with a fresh run of the retry schedule and starts the failure streak over, so a new
// streak alerts again from 1; a replay of the dead delivery gives it a fresh run too.
func TestDisableEnableAndReplayEachStartAFreshSchedule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	schedule := []time.Duration{0, 300 * time.Millisecond, 300 * time.Millisecond}
	r := e.startRelay(t, relayOpts{schedule: schedule, registry: reg})
	ctx := context.Background()
	rc := newReceiver(t)
	// The first answer is held until the endpoint is disabled: the retry is scheduled only once that
	// answer is recorded, so it always finds the endpoint disabled, however slow the machine. (Waiting
	// for the recorded attempt and disabling then raced the retry 300 ms later.)
	firstArrived, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	rc.setAnswer(func(n int) int {
		if n == 1 {
			close(firstArrived)
			<-release
		}
		return http.StatusInternalServerError
	})
	from := time.Now().Add(-time.Minute)
	ep := rc.endpointOn(t, r)
	e.record(t, "fresh", e.scheduled("calendly-fresh", 9))
	select {
	case <-firstArrived:
	case <-time.After(30 * time.Second):
		t.Fatal("timed out after 30s waiting for the first attempt")
	}
	_, err := r.DisableEndpoint(ctx, ep.ID, "maintenance")
	require.NoError(t, err)
	releaseOnce.Do(func() { close(release) })
	eventually(t, 30*time.Second, "the planned delivery to pause at its turn", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StatePaused)) == 1
	})
	d := deliveriesIn(t, r, ep.ID, relay.StatePaused)[0]
	assert.Equal(t, 1, d.Attempts, "nothing is sent to a disabled endpoint")
	assert.Equal(t, 1, rc.requestCount())
	assert.Equal(t, 1.0, metricstest.Sum(t, reg, "bookingledger_relay_deliveries",
		map[string]string{"endpoint": strconv.FormatInt(ep.ID, 10), "state": "paused"}))
	window := relay.ReplayQuery{EndpointID: ep.ID, From: from, To: time.Now().Add(time.Minute)}
	_, _, err = r.StartReplay(ctx, window)
	assert.ErrorIs(t, err, relay.ErrInvalid, "a disabled endpoint is not replayed")

	enabled, resumed, err := r.EnableEndpoint(ctx, ep.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, resumed)
	assert.False(t, enabled.Disabled)
	assert.Zero(t, enabled.ConsecutiveFailures, "enable starts the streak over")
	eventually(t, 30*time.Second, "the delivery to be dead", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateDead)) == 1
	})
	d = deliveriesIn(t, r, ep.ID, relay.StateDead)[0]
	assert.Equal(t, 1+len(schedule), d.Attempts, "the first attempt, then the whole schedule after enable")
	alerts, err := r.Alerts(ctx, ep.ID)
	require.NoError(t, err)
	var fromOne int
	for _, a := range alerts {
		if a.Kind == relay.AlertFailing && a.Failures == 1 {
			fromOne++
		}
	}
	assert.Equal(t, 2, fromOne, "the streak before disable and the one after enable each alerted at 1: %+v", alerts)

	window.OnlyFailed = true
	rep, _, err := r.StartReplay(ctx, window)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Total)
	eventually(t, 30*time.Second, "the replay to finish", func() bool {
		st, err := r.ReplayStatus(ctx, rep.ID)
		require.NoError(t, err)
		return st.Done()
	})
	d = deliveriesIn(t, r, ep.ID, relay.StateDead)[0]
	assert.Equal(t, 1+2*len(schedule), d.Attempts, "the replay ran the whole schedule again")
}

// A second rotation drops the secret rotated out by the first: messages are signed with the current
// secret and the one before it, never with the one before that.
func TestASecondRotationDropsTheOldestSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{})
	ctx := context.Background()
	rc := newReceiver(t)
	rc.verify = nil
	ep, first, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url()})
	require.NoError(t, err)
	_, second, err := r.RotateSecret(ctx, ep.ID)
	require.NoError(t, err)
	_, third, err := r.RotateSecret(ctx, ep.ID)
	require.NoError(t, err)
	e.record(t, "rot2", e.scheduled("calendly-rot2", 9))
	eventually(t, 30*time.Second, "the message", func() bool { return len(rc.messages()) == 1 })
	m := rc.messages()[0]
	sigs, err := standard.ParseSignatures(m.header.Get(standard.HeaderSignature))
	require.NoError(t, err)
	assert.Len(t, sigs, 2)
	verifies := func(secret string) bool {
		p, err := standard.New(providersSecrets(secret), 0)
		require.NoError(t, err)
		_, err = p.Verify(m.header, m.body, time.Now())
		return err == nil
	}
	assert.True(t, verifies(third), "the current secret signs")
	assert.True(t, verifies(second), "the secret before it signs during the overlap")
	assert.False(t, verifies(first), "the secret rotated out first no longer signs")
}

// An endpoint receives the events recorded from the moment it was added, even when the fan-out
// reaches an older event only after the endpoint exists (earlier events are a replay's). Deliveries
// are listed newest first, by booking, bounded by the limit; an unknown state is refused.
func TestAnEndpointGetsTheEventsRecordedAfterItWasAdded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{noProjection: true})
	ctx := context.Background()
	rc := newReceiver(t)
	e.record(t, "since-0", e.scheduled("calendly-since-0", 9)) // before the endpoint, planned after it
	ep := rc.endpointOn(t, r)
	e.startRelay(t, relayOpts{})
	e.record(t, "since-1", e.scheduled("calendly-since-1", 10))
	e.record(t, "since-2", e.scheduled("calendly-since-2", 11))
	e.record(t, "since-1-c", e.canceled("calendly-since-1"))
	eventually(t, 30*time.Second, "three deliveries", func() bool { return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) >= 3 })
	// The fan-out plans the log in order: the older event was planned (or not) before the others.
	all := deliveriesIn(t, r, ep.ID, "")
	require.Len(t, all, 3, "the event recorded before the endpoint was added is not delivered")
	assert.NotContains(t, rc.ids(), relay.WebhookID(e.eid("calendly-since-0", "scheduled")))
	for i := 1; i < len(all); i++ {
		assert.Greater(t, all[i-1].ID, all[i].ID, "newest first")
	}

	one, err := r.Deliveries(ctx, relay.DeliveryQuery{Booking: "calendly-since-1"})
	require.NoError(t, err)
	require.Len(t, one, 2)
	for _, d := range one {
		assert.Equal(t, "calendly-since-1", d.Booking)
	}
	newest, err := r.Deliveries(ctx, relay.DeliveryQuery{EndpointID: ep.ID, Limit: 2})
	require.NoError(t, err)
	require.Len(t, newest, 2)
	assert.Equal(t, []int64{all[0].ID, all[1].ID}, []int64{newest[0].ID, newest[1].ID})
	_, err = r.Deliveries(ctx, relay.DeliveryQuery{State: "failed"})
	assert.ErrorIs(t, err, relay.ErrInvalid)
}

// An endpoint's types are checked when it is added (at most 32 patterns of 1 to 128 bytes of a-z,
// 0-9, '.', '_', '-' and '*'); remove deletes it with its deliveries, attempts and alerts, and an
// unknown endpoint is not found.
func TestEndpointTypesAreCheckedAndRemoveTakesEverything(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}})
	ctx := context.Background()
	rc := newReceiver(t)
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf("booking.t%d.*", i)
	}
	for _, types := range [][]string{{"Booking.*"}, many, {strings.Repeat("b", 129)}, {""}} {
		_, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url(), Types: types})
		assert.ErrorIs(t, err, relay.ErrInvalidTypes, "%q", types)
	}
	_, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url(), Types: many[:32]})
	require.NoError(t, err, "32 patterns")
	_, _, err = r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url(), Types: []string{strings.Repeat("b", 128)}})
	require.NoError(t, err, "a pattern of 128 bytes")

	rc.setAnswer(func(int) int { return http.StatusInternalServerError })
	ep, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url()})
	require.NoError(t, err)
	e.record(t, "remove", e.scheduled("calendly-remove", 9))
	eventually(t, 30*time.Second, "the dead delivery and its alert", func() bool {
		alerts, err := r.Alerts(ctx, ep.ID)
		require.NoError(t, err)
		return len(deliveriesIn(t, r, ep.ID, relay.StateDead)) == 1 && len(alerts) == 1
	})
	require.NoError(t, r.RemoveEndpoint(ctx, ep.ID))
	_, err = r.Endpoint(ctx, ep.ID)
	assert.ErrorIs(t, err, relay.ErrNotFound)
	assert.Empty(t, deliveriesIn(t, r, ep.ID, ""))
	var attempts, alerts int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM relay_attempts), (SELECT count(*) FROM relay_alerts WHERE endpoint_id = $1)`,
		ep.ID).Scan(&attempts, &alerts))
	assert.Zero(t, attempts, "its attempts are deleted")
	assert.Zero(t, alerts, "its alerts are deleted")
	assert.ErrorIs(t, r.RemoveEndpoint(ctx, ep.ID), relay.ErrNotFound)
}

// An endpoint that moved is updated, not removed and added again: its dead delivery, retried, reaches
// the new URL with the same webhook-id and secret; a field not given keeps its value, and every field
// is checked as add checks it.
func TestUpdateEndpointMovesItsDeliveriesToTheNewURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}})
	ctx := context.Background()
	old, moved := newReceiver(t), newReceiver(t)
	old.setAnswer(func(int) int { return http.StatusServiceUnavailable })
	ep, secret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: old.url(), Description: "crm", Types: []string{"booking.*"}})
	require.NoError(t, err)
	moved.setSecrets(secret)
	e.record(t, "moved", e.scheduled("calendly-moved", 9))
	eventually(t, 30*time.Second, "the delivery to the old URL to be dead", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateDead)) == 1
	})
	dead := deliveriesIn(t, r, ep.ID, relay.StateDead)[0]

	newURL := moved.url()
	updated, err := r.UpdateEndpoint(ctx, ep.ID, relay.EndpointUpdate{URL: &newURL})
	require.NoError(t, err)
	assert.Equal(t, newURL, updated.URL)
	assert.Equal(t, "crm", updated.Description, "not given: kept")
	assert.Equal(t, []string{"booking.*"}, updated.Types, "not given: kept")
	_, err = r.RetryDelivery(ctx, dead.ID)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the retry at the new URL", func() bool { return len(moved.messages()) == 1 })
	assert.Equal(t, map[string]int{dead.WebhookID: 1}, moved.ids(), "same webhook-id, verified with the same secret")
	assert.Empty(t, moved.invalidMessages())

	every, desc := []string{}, "billing"
	updated, err = r.UpdateEndpoint(ctx, ep.ID, relay.EndpointUpdate{Types: &every, Description: &desc})
	require.NoError(t, err)
	assert.Equal(t, []string{}, updated.Types, "an empty list is every type")
	assert.Equal(t, "billing", updated.Description)
	assert.Equal(t, newURL, updated.URL)

	bad, ftp, long := []string{"Bad"}, "ftp://example.com/", strings.Repeat("x", 501)
	for _, c := range []struct {
		name string
		id   int64
		u    relay.EndpointUpdate
		err  error
	}{
		{"nothing", ep.ID, relay.EndpointUpdate{}, relay.ErrInvalid},
		{"types", ep.ID, relay.EndpointUpdate{Types: &bad}, relay.ErrInvalidTypes},
		{"url", ep.ID, relay.EndpointUpdate{URL: &ftp}, relay.ErrInvalidURL},
		{"description", ep.ID, relay.EndpointUpdate{Description: &long}, relay.ErrInvalid},
		{"unknown endpoint", ep.ID + 100, relay.EndpointUpdate{Description: &desc}, relay.ErrNotFound},
	} {
		_, err := r.UpdateEndpoint(ctx, c.id, c.u)
		assert.ErrorIs(t, err, c.err, c.name)
	}
	got, err := r.Endpoint(ctx, ep.ID)
	require.NoError(t, err)
	assert.Equal(t, updated.URL, got.URL, "refused updates change nothing")
	assert.Equal(t, updated.Description, got.Description)
}

// TestRelayWithoutEndpointsOnlyMovesItsCheckpoint: with no endpoint the relay's batches plan nothing
// and only move its checkpoint (checkpoint.Config.Idle); an endpoint added later gets the events
// recorded from then on, as with a relay that planned every batch.
func TestRelayWithoutEndpointsOnlyMovesItsCheckpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{})
	ctx := context.Background()
	e.record(t, "idle-0", e.scheduled("calendly-idle-0", 9))
	eventually(t, 30*time.Second, "the relay's checkpoint past the first event", func() bool {
		cp, err := checkpoint.Read(ctx, e.pool, relay.ProjectionName)
		require.NoError(t, err)
		return cp.EventsApplied >= 1
	})
	assert.Empty(t, deliveriesIn(t, r, 0, ""), "no endpoint, no delivery")

	rc := newReceiver(t)
	ep := rc.endpointOn(t, r)
	e.record(t, "idle-1", e.scheduled("calendly-idle-1", 10))
	eventually(t, 30*time.Second, "the later event delivered", func() bool { return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) >= 1 })
	all := deliveriesIn(t, r, ep.ID, "")
	require.Len(t, all, 1)
	assert.Equal(t, "calendly-idle-1", all[0].Booking)
	assert.NotContains(t, rc.ids(), relay.WebhookID(e.eid("calendly-idle-0", "scheduled")))
}
