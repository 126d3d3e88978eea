package gcal_test

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

	"bookingledger/adapters/gcal"
	"bookingledger/adapters/gcal/gcalfake"
	"bookingledger/adapters/process"
)

const calID = "dr.smith@clinic.example"

func newTarget(t *testing.T, s *gcalfake.Server, timeout time.Duration) *gcal.Target {
	t.Helper()
	tg, err := gcal.New(gcal.Config{Endpoint: s.Endpoint(), AllowPrivate: true, Timeout: timeout,
		Calendars: func(r string) (gcal.Calendar, bool) {
			return gcal.Calendar{ID: calID, As: "dr.smith@clinic.example"}, r == "dr-smith"
		}})
	require.NoError(t, err)
	return tg
}

var slot = [2]time.Time{time.Date(2031, 5, 1, 9, 0, 0, 0, time.UTC), time.Date(2031, 5, 1, 10, 0, 0, 0, time.UTC)}

func event(key uuid.UUID, start, end time.Time) process.Event {
	return process.Event{UID: key.String(), Summary: "Booking b", Start: start, End: end}
}

// The key is the event's id: a second create of it (a redelivery, a retry) and 20 concurrent ones
// make one event; the others are told the id is taken, and a GET finds ours.
func TestCreateIsOnceUnderRepeatsAndConcurrentCopies(t *testing.T) {
	s := gcalfake.Start()
	defer s.Close()
	tg := newTarget(t, s, 5*time.Second)
	ctx := context.Background()
	key := uuid.New()
	href, err := tg.Href("dr-smith", key)
	require.NoError(t, err)
	assert.Equal(t, s.Endpoint()+"calendars/dr.smith@clinic.example/events/"+gcal.EventID(key)+"#as=dr.smith%40clinic.example", href)
	_, err = tg.Href("dr-jones", key)
	assert.ErrorContains(t, err, "no Google calendar configured for resource dr-jones")

	var wg sync.WaitGroup
	var created, taken atomic.Int32
	for range 20 {
		wg.Go(func() {
			_, err := tg.Create(ctx, href, event(key, slot[0], slot[1]))
			switch {
			case err == nil:
				created.Add(1)
			case assert.ErrorIs(t, err, process.ErrPrecondition):
				taken.Add(1)
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 1, created.Load())
	assert.EqualValues(t, 19, taken.Load())
	for range 5 {
		_, err := tg.Create(ctx, href, event(key, slot[0], slot[1]))
		require.ErrorIs(t, err, process.ErrPrecondition)
	}
	assert.Len(t, s.Events(calID), 1)
	assert.Equal(t, 1, s.Inserts())
	got, err := tg.Get(ctx, href)
	require.NoError(t, err)
	assert.Equal(t, key.String(), got.UID)
	assert.True(t, got.Start.Equal(slot[0]) && got.End.Equal(slot[1]))
	assert.NotEmpty(t, got.ETag)
}

// A deleted event keeps its id: a create of it is 409, and the target revives the event with an
// update. Deleting twice is done (410, then the worker's ErrNotFound); so is deleting what never was.
func TestDeletedIdIsRevivedAndDeleteTwiceIsDone(t *testing.T) {
	s := gcalfake.Start()
	defer s.Close()
	tg := newTarget(t, s, 5*time.Second)
	ctx := context.Background()
	key := uuid.New()
	href, _ := tg.Href("dr-smith", key)
	_, err := tg.Create(ctx, href, event(key, slot[0], slot[1]))
	require.NoError(t, err)
	require.NoError(t, tg.Delete(ctx, href))
	_, err = tg.Get(ctx, href)
	require.ErrorIs(t, err, process.ErrNotFound, "a cancelled event is not there")
	require.ErrorIs(t, tg.Delete(ctx, href), process.ErrNotFound, "410 Resource has been deleted")
	other, _ := tg.Href("dr-smith", uuid.New())
	require.ErrorIs(t, tg.Delete(ctx, other), process.ErrNotFound)

	etag, err := tg.Create(ctx, href, event(key, slot[0], slot[1]))
	require.NoError(t, err, "revived by update")
	assert.NotEmpty(t, etag)
	evs := s.Events(calID)
	require.Len(t, evs, 1)
	assert.Equal(t, "confirmed", evs[0].Status)
	assert.Equal(t, 1, s.Inserts())
	assert.Equal(t, 1, s.Calls(http.MethodPut))
}

// An update carries the stored ETag; when someone changed the event since (412), the target re-reads
// it and retries once with its ETag, keeping their change and writing the new slot.
func TestStaleETagIsReReadAndRetried(t *testing.T) {
	s := gcalfake.Start()
	defer s.Close()
	tg := newTarget(t, s, 5*time.Second)
	ctx := context.Background()
	key := uuid.New()
	href, _ := tg.Href("dr-smith", key)
	etag, err := tg.Create(ctx, href, event(key, slot[0], slot[1]))
	require.NoError(t, err)
	s.Touch(calID, gcal.EventID(key), "the host's note")

	moved := event(key, slot[0].Add(2*time.Hour), slot[1].Add(2*time.Hour))
	var mu sync.Mutex
	var puts []string
	s.SetFault(func(r *http.Request) (int, string) {
		if r.Method == http.MethodPut {
			mu.Lock()
			puts = append(puts, r.Header.Get("If-Match"))
			mu.Unlock()
		}
		return 0, ""
	})
	newTag, err := tg.Update(ctx, href, etag, moved)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, puts, 2, "one stale, one after the re-read")
	assert.Equal(t, etag, puts[0])
	assert.NotEqual(t, etag, puts[1])
	got, err := tg.Get(ctx, href)
	require.NoError(t, err)
	assert.Equal(t, newTag, got.ETag)
	assert.True(t, got.Start.Equal(moved.Start))
	assert.Equal(t, "the host's note", s.Events(calID)[0].Description)

	// With the right ETag, one PUT.
	puts = nil
	mu.Unlock()
	_, err = tg.Update(ctx, href, newTag, event(key, slot[0], slot[1]))
	mu.Lock()
	require.NoError(t, err)
	assert.Len(t, puts, 1)
}

// What each answer proves: 503, 429 and 403 rateLimitExceeded wrote nothing (retry); 401 and 400
// refuse for good; a write that timed out after reaching the server is unknown.
func TestAnswersAreClassified(t *testing.T) {
	s := gcalfake.Start()
	defer s.Close()
	ctx := context.Background()
	for code, want := range map[int]error{http.StatusServiceUnavailable: process.ErrNothingDone, http.StatusTooManyRequests: process.ErrNothingDone,
		http.StatusForbidden: process.ErrNothingDone, http.StatusUnauthorized: process.ErrRejected, http.StatusBadRequest: process.ErrRejected} {
		s.SetFault(func(*http.Request) (int, string) { return code, "1" })
		tg := newTarget(t, s, 5*time.Second)
		key := uuid.New()
		href, _ := tg.Href("dr-smith", key)
		_, err := tg.Create(ctx, href, event(key, slot[0], slot[1]))
		require.ErrorIs(t, err, want, "%d", code)
		if want == process.ErrRejected {
			require.NotErrorIs(t, err, process.ErrNothingDone)
		}
	}
	s.SetFault(nil)
	release := make(chan struct{})
	s.SetAfterWrite(func(*http.Request) { <-release })
	tg := newTarget(t, s, 300*time.Millisecond)
	key := uuid.New()
	href, _ := tg.Href("dr-smith", key)
	_, err := tg.Create(ctx, href, event(key, slot[0], slot[1]))
	close(release)
	require.Error(t, err)
	for _, e := range []error{process.ErrNothingDone, process.ErrRejected, process.ErrPrecondition, process.ErrNotFound} {
		require.NotErrorIs(t, err, e, "an insert that reached the server is unknown: %v", err)
	}
	s.SetAfterWrite(nil)
	got, err := tg.Get(ctx, href)
	require.NoError(t, err, "the lookup finds it")
	assert.Equal(t, key.String(), got.UID)
}

// The create writes the event's description (the calendar templates'), and so does an update of an
// event nobody else changed (its ETag is ours); one that someone changed keeps their description
// (TestStaleETagIsReReadAndRetried).
func TestDescriptionIsWrittenByTheCreate(t *testing.T) {
	s := gcalfake.Start()
	defer s.Close()
	tg := newTarget(t, s, 5*time.Second)
	ctx := context.Background()
	key := uuid.New()
	href, _ := tg.Href("dr-smith", key)
	ev := event(key, slot[0], slot[1])
	ev.Description = "Reference: calendly-b"
	etag, err := tg.Create(ctx, href, ev)
	require.NoError(t, err)
	require.Len(t, s.Events(calID), 1)
	assert.Equal(t, "Reference: calendly-b", s.Events(calID)[0].Description)

	moved := ev
	moved.Start, moved.End, moved.Description = slot[0].Add(time.Hour), slot[1].Add(time.Hour), "another text"
	_, err = tg.Update(ctx, href, etag, moved)
	require.NoError(t, err)
	assert.Equal(t, "another text", s.Events(calID)[0].Description)
}
