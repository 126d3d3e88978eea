package msgraph_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/msgraph"
	"bookingledger/adapters/msgraph/msgraphfake"
	"bookingledger/adapters/process"
)

func newTarget(t *testing.T, s *msgraphfake.Server, timeout time.Duration) *msgraph.Target {
	t.Helper()
	tg, err := msgraph.New(msgraph.Config{Endpoint: s.Endpoint(), AllowPrivate: true, Timeout: timeout,
		Mailboxes: func(r string) (msgraph.Mailbox, bool) {
			return msgraph.Mailbox{User: "jones@clinic.example"}, r == "dr-jones"
		}})
	require.NoError(t, err)
	return tg
}

var slot = [2]time.Time{time.Date(2031, 7, 1, 9, 0, 0, 0, time.UTC), time.Date(2031, 7, 1, 10, 0, 0, 0, time.UTC)}

func event(key uuid.UUID, start, end time.Time) process.Event {
	return process.Event{UID: key.String(), Summary: "Booking b", Start: start, End: end}
}

// A create carries the key as transactionId: a repeat and 20 concurrent copies make one event, and
// the lookup by our extended property finds it with its slot and ETag.
func TestCreateIsOnceUnderRepeatsAndConcurrentCopies(t *testing.T) {
	s := msgraphfake.Start()
	defer s.Close()
	tg := newTarget(t, s, 5*time.Second)
	ctx := context.Background()
	key := uuid.New()
	href, err := tg.Href("dr-jones", key)
	require.NoError(t, err)
	assert.Equal(t, s.Endpoint()+"users/jones@clinic.example/calendar/events#key="+key.String(), href)
	_, err = tg.Href("dr-smith", key)
	assert.ErrorContains(t, err, "no Microsoft 365 mailbox configured for resource dr-smith")

	_, err = tg.Get(ctx, href)
	require.ErrorIs(t, err, process.ErrNotFound)
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 20 {
		wg.Go(func() {
			if _, err := tg.Create(ctx, href, event(key, slot[0], slot[1])); assert.NoError(t, err) {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	_, err = tg.Create(ctx, href, event(key, slot[0], slot[1]))
	require.NoError(t, err)
	assert.EqualValues(t, 20, ok.Load())
	require.Len(t, s.Events(), 1)
	got, err := tg.Get(ctx, href)
	require.NoError(t, err)
	assert.Equal(t, key.String(), got.UID)
	assert.True(t, got.Start.Equal(slot[0]) && got.End.Equal(slot[1]), "%v %v", got.Start, got.End)
	assert.Equal(t, s.Events()[0].ETag, got.ETag)
}

// A create whose answer was lost (the call timed out after Graph stored it) is unknown; the lookup
// finds the event.
func TestALostCreateIsFoundByLookup(t *testing.T) {
	s := msgraphfake.Start()
	defer s.Close()
	release := make(chan struct{})
	s.SetAfterWrite(func(*http.Request) { <-release })
	tg := newTarget(t, s, 300*time.Millisecond)
	key := uuid.New()
	href, _ := tg.Href("dr-jones", key)
	_, err := tg.Create(context.Background(), href, event(key, slot[0], slot[1]))
	close(release)
	require.Error(t, err)
	for _, e := range []error{process.ErrNothingDone, process.ErrRejected, process.ErrNotFound} {
		require.NotErrorIs(t, err, e, "a POST that reached Graph is unknown: %v", err)
	}
	s.SetAfterWrite(nil)
	got, err := tg.Get(context.Background(), href)
	require.NoError(t, err)
	assert.Equal(t, key.String(), got.UID)
	assert.Equal(t, 1, s.Calls(http.MethodPost))
}

// 429 with a Retry-After that fits the call is waited for and the request sent again; one that does
// not fit is "nothing done" (the step is retried later); either way one event.
func TestTooManyRequestsHonoursRetryAfter(t *testing.T) {
	s := msgraphfake.Start()
	defer s.Close()
	var throttled atomic.Int32
	s.SetFault(func(r *http.Request) (int, string) {
		if r.Method == http.MethodPost && throttled.Add(1) == 1 {
			return http.StatusTooManyRequests, "1"
		}
		return 0, ""
	})
	tg := newTarget(t, s, 5*time.Second)
	key := uuid.New()
	href, _ := tg.Href("dr-jones", key)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	began := time.Now()
	_, err := tg.Create(ctx, href, event(key, slot[0], slot[1]))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(began), time.Second, "waited for Retry-After")
	assert.Len(t, s.Events(), 1)

	s.SetFault(func(*http.Request) (int, string) { return http.StatusTooManyRequests, "120" })
	key = uuid.New()
	href, _ = tg.Href("dr-jones", key)
	_, err = tg.Create(ctx, href, event(key, slot[0], slot[1]))
	require.ErrorIs(t, err, process.ErrNothingDone)
	assert.ErrorContains(t, err, "Retry-After 120")
	assert.Len(t, s.Events(), 1)
}

// An update sends the ETag; a stale one (412) is re-read and retried once. Delete twice is done:
// the lookup finds nothing the second time, and a 404 from DELETE itself is done too.
func TestUpdateWithStaleETagAndDeleteTwice(t *testing.T) {
	s := msgraphfake.Start()
	defer s.Close()
	tg := newTarget(t, s, 5*time.Second)
	ctx := context.Background()
	key := uuid.New()
	href, _ := tg.Href("dr-jones", key)
	etag, err := tg.Create(ctx, href, event(key, slot[0], slot[1]))
	require.NoError(t, err)
	s.Touch(s.Events()[0].ID)
	var mu sync.Mutex
	var matches []string
	s.SetFault(func(r *http.Request) (int, string) {
		if r.Method == http.MethodPatch {
			mu.Lock()
			matches = append(matches, r.Header.Get("If-Match"))
			mu.Unlock()
		}
		return 0, ""
	})
	moved := event(key, slot[0].Add(3*time.Hour), slot[1].Add(3*time.Hour))
	newTag, err := tg.Update(ctx, href, etag, moved)
	require.NoError(t, err)
	mu.Lock()
	assert.Equal(t, []string{etag, s.Events()[0].ETag}[0], matches[0])
	assert.Len(t, matches, 2, "stale, then the re-read ETag")
	mu.Unlock()
	got, err := tg.Get(ctx, href)
	require.NoError(t, err)
	assert.True(t, got.Start.Equal(moved.Start))
	assert.Equal(t, newTag, got.ETag)
	assert.Contains(t, string(s.Events()[0].Body), "the host's note", "PATCH kept the other change")

	require.NoError(t, tg.Delete(ctx, href))
	require.ErrorIs(t, tg.Delete(ctx, href), process.ErrNotFound)
	assert.Empty(t, s.Events())

	// The event vanishes between the lookup and the DELETE: Graph answers 404, which is done.
	key = uuid.New()
	href, _ = tg.Href("dr-jones", key)
	_, err = tg.Create(ctx, href, event(key, slot[0], slot[1]))
	require.NoError(t, err)
	s.SetFault(func(r *http.Request) (int, string) {
		if r.Method == http.MethodDelete {
			return http.StatusNotFound, ""
		}
		return 0, ""
	})
	require.ErrorIs(t, tg.Delete(ctx, href), process.ErrNotFound)
}

// The create writes the event's description as its text body; an update (PATCH) moves the slot and
// leaves the body as it is, the host's edits of it included.
func TestDescriptionIsWrittenByTheCreate(t *testing.T) {
	s := msgraphfake.Start()
	defer s.Close()
	tg := newTarget(t, s, 5*time.Second)
	ctx := context.Background()
	key := uuid.New()
	href, _ := tg.Href("dr-jones", key)
	ev := event(key, slot[0], slot[1])
	ev.Description = "Reference: calendly-b"
	etag, err := tg.Create(ctx, href, ev)
	require.NoError(t, err)
	require.Len(t, s.Events(), 1)
	assert.JSONEq(t, `{"contentType":"text","content":"Reference: calendly-b"}`, string(s.Events()[0].Body))

	moved := ev
	moved.Start, moved.End, moved.Description = slot[0].Add(time.Hour), slot[1].Add(time.Hour), "another text"
	_, err = tg.Update(ctx, href, etag, moved)
	require.NoError(t, err)
	got, err := tg.Get(ctx, href)
	require.NoError(t, err)
	assert.True(t, got.Start.Equal(moved.Start))
	assert.JSONEq(t, `{"contentType":"text","content":"Reference: calendly-b"}`, string(s.Events()[0].Body))
}
