package sample_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers/calendly"
)

// Calendly's reschedule is two deliveries, in either order: the old invitee canceled with
// rescheduled: true and new_invitee, the new invitee created with old_invitee, linked by URI. The real
// mapper links the two bookings.
func TestCalendlyReschedulePair(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	to := sample.DefaultStart().Add(50 * time.Hour)
	pair, err := sample.CalendlyReschedule(sample.Params{Booking: "b1"}, to, false)
	require.NoError(t, err)
	require.Len(t, pair, 2)
	assert.Equal(t, calendly.EventInviteeCanceled, pair[0].Event)
	assert.Equal(t, calendly.EventInviteeCreated, pair[1].Event)
	swapped, err := sample.CalendlyReschedule(sample.Params{Booking: "b1"}, to, true)
	require.NoError(t, err)
	assert.Equal(t, pair[0], swapped[1], "created first: the same two bodies")

	var canceled, created struct {
		Payload struct {
			URI            string  `json:"uri"`
			Status         string  `json:"status"`
			Rescheduled    bool    `json:"rescheduled"`
			OldInvitee     *string `json:"old_invitee"`
			NewInvitee     *string `json:"new_invitee"`
			UpdatedAt      string  `json:"updated_at"`
			CreatedAt      string  `json:"created_at"`
			ScheduledEvent struct {
				URI       string `json:"uri"`
				StartTime string `json:"start_time"`
			} `json:"scheduled_event"`
		} `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(pair[0].Body, &canceled))
	require.NoError(t, json.Unmarshal(pair[1].Body, &created))
	assert.Equal(t, "canceled", canceled.Payload.Status)
	assert.True(t, canceled.Payload.Rescheduled)
	require.NotNil(t, canceled.Payload.NewInvitee)
	assert.Equal(t, created.Payload.URI, *canceled.Payload.NewInvitee)
	require.NotNil(t, created.Payload.OldInvitee)
	assert.Equal(t, canceled.Payload.URI, *created.Payload.OldInvitee)
	assert.Nil(t, created.Payload.NewInvitee)
	assert.False(t, created.Payload.Rescheduled)
	assert.NotEqual(t, canceled.Payload.ScheduledEvent.URI, created.Payload.ScheduledEvent.URI, "a new scheduled event")
	assert.Equal(t, to.Format("2006-01-02T15:04:05.000000Z"), created.Payload.ScheduledEvent.StartTime)
	assert.Equal(t, canceled.Payload.UpdatedAt, created.Payload.CreatedAt, "one moment")

	p, _ := realProviderWithAPI(t, calendly.Name)
	for i, d := range pair {
		h, err := sample.Sign(calendly.Name, secret, d.Body, now)
		require.NoError(t, err)
		m, err := p.Map(context.Background(), h, d.Body, now)
		require.NoError(t, err)
		require.NotEmpty(t, m.Events, "delivery %d: %s", i, m.Reason)
		want := map[int]string{0: "calendly-b1", 1: "calendly-" + sample.CalendlyRescheduledInvitee("b1")}[i]
		assert.Equal(t, want, string(m.Events[0].Booking))
	}
}
