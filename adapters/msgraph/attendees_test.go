package msgraph_test

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

	"bookingledger/adapters/msgraph/msgraphfake"
	"bookingledger/adapters/process"
)

// A seated booking's attendees go into the Graph event's body text, never into its attendees (Graph
// sends meeting requests to an organizer's attendees, and cancellations when the event is deleted),
// on the create and on every update, the one after a 412 included: the list is rewritten.
func TestSeatedEventListsAttendeesInTheBodyOnly(t *testing.T) {
	s := msgraphfake.Start()
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
	href, err := tg.Href("dr-jones", key)
	require.NoError(t, err)
	ev := event(key, slot[0], slot[1])
	ev.Seated, ev.Attendees = true, []process.Attendee{{Name: "Ada", Email: "ada@example.com"}, {Name: "Cy", Email: "cy@example.com"}}
	_, err = tg.Create(ctx, href, ev)
	require.NoError(t, err)
	body := func() string {
		t.Helper()
		evs := s.Events()
		require.Len(t, evs, 1)
		var b struct{ ContentType, Content string }
		require.NoError(t, json.Unmarshal(evs[0].Body, &b))
		assert.Equal(t, "text", b.ContentType)
		return b.Content
	}
	assert.Equal(t, "Attendees:\n- Ada <ada@example.com>\n- Cy <cy@example.com>", body())

	got, err := tg.Get(ctx, href)
	require.NoError(t, err)
	ev.Attendees, ev.Sequence = ev.Attendees[1:], 1
	_, err = tg.Update(ctx, href, got.ETag, ev)
	require.NoError(t, err)
	assert.Equal(t, "Attendees:\n- Cy <cy@example.com>", body())

	s.Touch(s.Events()[0].ID) // the host edited the body: a stale ETag
	ev.Attendees = nil
	_, err = tg.Update(ctx, href, got.ETag, ev)
	require.NoError(t, err)
	assert.Equal(t, "Attendees: none known", body())

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, bodies)
	for _, b := range bodies {
		assert.NotContains(t, b, "attendees", "never Graph's attendees: it would invite them")
	}
}
