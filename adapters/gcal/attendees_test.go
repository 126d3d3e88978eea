package gcal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/gcal/gcalfake"
	"bookingledger/adapters/process"
)

// A seated booking's attendees go into the Google event's description, never into its attendees
// (Google would invite them), on the insert and on every update — the 412 path included, which
// otherwise keeps the host's description: the list is rewritten, so an erased attendee leaves it.
func TestSeatedEventListsAttendeesInTheDescriptionOnly(t *testing.T) {
	s := gcalfake.Start()
	defer s.Close()
	var mu sync.Mutex
	var bodies []map[string]any
	s.SetFault(func(r *http.Request) (int, string) {
		if r.Method == http.MethodGet || r.Body == nil {
			return 0, ""
		}
		raw, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(raw))
		var m map[string]any
		if json.Unmarshal(raw, &m) == nil {
			mu.Lock()
			bodies = append(bodies, m)
			mu.Unlock()
		}
		return 0, ""
	})
	tg := newTarget(t, s, 0)
	ctx := context.Background()
	key := uuid.New()
	href, err := tg.Href("dr-smith", key)
	require.NoError(t, err)
	ev := event(key, slot[0], slot[1])
	ev.Description = "Booked through Cal.com."
	ev.Seated, ev.Attendees = true, []process.Attendee{{Name: "Ada", Email: "ada@example.com"}, {Email: "cy@example.com"}}
	etag, err := tg.Create(ctx, href, ev)
	require.NoError(t, err)
	events := s.Events(calID)
	require.Len(t, events, 1)
	assert.Equal(t, "Booked through Cal.com.\n\nAttendees:\n- Ada <ada@example.com>\n- cy@example.com", events[0].Description)

	ev.Attendees, ev.Sequence = ev.Attendees[1:], 1
	_, err = tg.Update(ctx, href, etag, ev)
	require.NoError(t, err)
	assert.Equal(t, "Booked through Cal.com.\n\nAttendees:\n- cy@example.com", s.Events(calID)[0].Description)

	// The host touched the event since (a stale ETag): the retry still rewrites the list.
	s.Touch(calID, s.Events(calID)[0].ID, "the host's note, naming ada@example.com")
	ev.Attendees = nil
	_, err = tg.Update(ctx, href, etag, ev)
	require.NoError(t, err)
	got := s.Events(calID)[0].Description
	assert.Equal(t, "Booked through Cal.com.\n\nAttendees: none known", got)
	assert.NotContains(t, got, "ada@example.com")

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, bodies)
	for _, b := range bodies {
		assert.NotContains(t, b, "attendees", "never Google's attendees: it would invite them")
	}
}
