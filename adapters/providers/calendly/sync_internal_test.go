package calendly

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
)

// An invitee read through the API, whatever its bytes, is either mapped — a create first, every event
// of its own booking, named by its identity, none before the create — or an item whose error wraps
// ErrUnmappable. It never panics and never fails the sync.
func FuzzInviteeItem(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "invitee_*.json"))
	require.NoError(f, err)
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		var env struct {
			Payload json.RawMessage `json:"payload"`
		}
		require.NoError(f, json.Unmarshal(b, &env))
		f.Add([]byte(env.Payload))
	}
	f.Add([]byte(`{"uri":"https://api.calendly.com/scheduled_events/E/invitees/A","status":"canceled","created_at":"2024-05-14T09:12:30Z","cancellation":{"created_at":"2024-05-13T09:12:30Z"}}`))
	f.Add([]byte(`{"uri":"https://api.calendly.com/scheduled_events/E/invitees/A","created_at":"2024-05-14T09:12:30Z","no_show":{"uri":"x"}}`))
	f.Add([]byte(`[]`))
	se := scheduledEvent{
		URI: "https://api.calendly.com/scheduled_events/E", StartTime: "2024-05-21T14:00:00Z", EndTime: "2024-05-21T14:30:00Z",
		EventMemberships: []struct {
			User string `json:"user"`
		}{{User: "https://api.calendly.com/users/U"}},
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		item := inviteeItem(se, raw)
		assert.Equal(t, raw, []byte(item.Body))
		if item.Err != nil {
			assert.ErrorIs(t, item.Err, providers.ErrUnmappable)
			assert.Empty(t, item.Mapped.Events)
			return
		}
		events := item.Mapped.Events
		require.NotEmpty(t, events)
		assert.Equal(t, booking.TypeScheduled, events[0].Type())
		for _, e := range events {
			assert.Equal(t, events[0].Booking, e.Booking)
			assert.Equal(t, providers.EventID(Name, e.ProviderRef), e.ID)
			assert.False(t, e.OccurredAt.Before(events[0].OccurredAt), "nothing folds before the create")
		}
	})
}
