package caldav_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav"
	"bookingledger/adapters/caldav/caldavsink"
	"bookingledger/adapters/process"
)

// sink is a CalDAV server (go-webdav's handler over an in-memory store) whose next answers can be
// replaced by a status.
type sink struct {
	*caldavsink.Server
	fault atomic.Int32
}

func startSink(t *testing.T) *sink {
	t.Helper()
	s := &sink{}
	var err error
	s.Server, err = caldavsink.Start(caldavsink.Config{Fault: func(*http.Request) int { return int(s.fault.Load()) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func target(t *testing.T, urlTemplate string, allowPrivate bool) *caldav.Target {
	t.Helper()
	tg, err := caldav.New(caldav.Config{URLTemplate: urlTemplate, AllowPrivate: allowPrivate, Timeout: 5 * time.Second})
	require.NoError(t, err)
	return tg
}

var (
	start = time.Date(2027, 3, 15, 10, 0, 0, 0, time.UTC)
	event = process.Event{UID: "booking-calendly-a@bookingledger", Summary: "Intro call", Start: start, End: start.Add(30 * time.Minute), Sequence: 0}
)

// The calendar object is written exactly once per href: a create is conditional (If-None-Match: *),
// so a second create after an unknown outcome answers ErrPrecondition and leaves the object as the
// first wrote it; an update is conditional on the ETag it read (If-Match), or on the object existing
// when it read none, so an update never creates an object nor overwrites a newer one.
func TestWritesAreConditional(t *testing.T) {
	ctx := context.Background()
	s := startSink(t)
	tg := target(t, s.URL()+"/dav/{resource}/bookings/", true)
	href, err := tg.Href("https://api.calendly.com/users/HOST", uuid.New())
	require.NoError(t, err)

	etag, err := tg.Create(ctx, href, event)
	require.NoError(t, err)
	require.NotEmpty(t, etag)
	again := event
	again.Summary = "a second create"
	_, err = tg.Create(ctx, href, again)
	require.ErrorIs(t, err, process.ErrPrecondition, "a second create of one href")
	objects := s.Store.Objects()
	require.Len(t, objects, 1)
	assert.Equal(t, "Intro call", objects[0].Summary, "the first create's object stays")

	moved := event
	moved.Start, moved.End, moved.Sequence = start.Add(time.Hour), start.Add(90*time.Minute), 1
	_, err = tg.Update(ctx, href, "not-"+etag, moved)
	require.ErrorIs(t, err, process.ErrPrecondition, "an update over an ETag that is not the object's")
	newEtag, err := tg.Update(ctx, href, etag, moved)
	require.NoError(t, err)
	assert.NotEqual(t, etag, newEtag)
	_, err = tg.Update(ctx, href, etag, event)
	require.ErrorIs(t, err, process.ErrPrecondition, "an update over the ETag the last update replaced")

	missing, err := tg.Href("https://api.calendly.com/users/HOST", uuid.New())
	require.NoError(t, err)
	_, err = tg.Update(ctx, missing, "", moved)
	require.ErrorIs(t, err, process.ErrPrecondition, "an update without an ETag of an object that does not exist")
	require.Len(t, s.Store.Objects(), 1, "no update created an object")

	got, err := tg.Get(ctx, href)
	require.NoError(t, err)
	assert.Equal(t, process.Object{UID: event.UID, Start: moved.Start, End: moved.End, ETag: newEtag}, got)
	assert.Contains(t, string(s.Store.Objects()[0].Data), "SEQUENCE:1\r\n", "the update counts itself (RFC 5545 SEQUENCE)")

	require.NoError(t, tg.Delete(ctx, href))
	_, err = tg.Get(ctx, href)
	require.ErrorIs(t, err, process.ErrNotFound)
	require.ErrorIs(t, tg.Delete(ctx, href), process.ErrNotFound)
}

// What an answer proves decides what the worker does next: 412 a precondition, 404 and 410 no such
// object, 5xx, 429 and 408 that nothing was done (retry), any other refusal a rejection (no retry).
func TestAnswersAreClassified(t *testing.T) {
	ctx := context.Background()
	s := startSink(t)
	tg := target(t, s.URL()+"/dav/{resource}/bookings/", true)
	href, err := tg.Href("host-1", uuid.New())
	require.NoError(t, err)
	for status, want := range map[int]error{
		http.StatusPreconditionFailed:  process.ErrPrecondition,
		http.StatusNotFound:            process.ErrNotFound,
		http.StatusGone:                process.ErrNotFound,
		http.StatusInternalServerError: process.ErrNothingDone,
		http.StatusServiceUnavailable:  process.ErrNothingDone,
		http.StatusTooManyRequests:     process.ErrNothingDone,
		http.StatusRequestTimeout:      process.ErrNothingDone,
		http.StatusBadRequest:          process.ErrRejected,
		http.StatusForbidden:           process.ErrRejected,
	} {
		s.fault.Store(int32(status))
		_, err := tg.Create(ctx, href, event)
		if errors.Is(want, process.ErrNotFound) {
			// A write the server refused wrote nothing: not an unknown outcome.
			require.ErrorIs(t, err, process.ErrRejected, "PUT answered %d", status)
			require.NotErrorIs(t, err, process.ErrNotFound, "PUT answered %d", status)
		} else {
			require.ErrorIs(t, err, want, "PUT answered %d", status)
		}
		_, err = tg.Get(ctx, href)
		require.ErrorIs(t, err, want, "HEAD answered %d", status)
		require.ErrorIs(t, tg.Delete(ctx, href), want, "DELETE answered %d", status)
	}
	s.fault.Store(0)
	assert.Empty(t, s.Store.Objects())
}

// Without AllowPrivate a target refuses a loopback address before connecting: a rejection (nothing
// was sent), not an unknown outcome.
func TestAPrivateAddressIsRejectedUnsent(t *testing.T) {
	s := startSink(t)
	tg := target(t, s.URL()+"/dav/{resource}/bookings/", false)
	href, err := tg.Href("host-1", uuid.New())
	require.NoError(t, err)
	_, err = tg.Create(context.Background(), href, event)
	require.ErrorIs(t, err, process.ErrRejected)
	assert.Empty(t, s.Store.Objects())
}

// A resource's collection is readable (its last path segment, lower-cased, [a-z0-9-], at most 40
// characters) and unique (a hash of the whole resource); an object's href is the collection's URL,
// with a slash added when the template ends without one, and the step's key.
func TestCollectionsAndHrefs(t *testing.T) {
	a, b := caldav.Collection("https://api.calendly.com/users/HOST"), caldav.Collection("https://other.example/users/HOST")
	assert.True(t, strings.HasPrefix(a, "host-"), a)
	assert.NotEqual(t, a, b, "two resources with one last segment")
	long := caldav.Collection("https://x.example/" + strings.Repeat("a", 100))
	assert.Equal(t, strings.Repeat("a", 40), long[:strings.LastIndex(long, "-")], "the readable part is bounded")
	assert.Len(t, long, 40+1+8)
	assert.Len(t, caldav.Collection("%%%"), 12, "nothing readable: the hash alone")

	key := uuid.New()
	tg := target(t, "http://dav.example/calendars/{resource}", false)
	href, err := tg.Href("host-1", key)
	require.NoError(t, err)
	assert.Equal(t, "http://dav.example/calendars/"+caldav.Collection("host-1")+"/"+key.String()+".ics", href)
	_, err = tg.Href("", key)
	require.Error(t, err, "a booking without a host resource has no calendar")
}
