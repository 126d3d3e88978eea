package calcom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/calcom/calcomapi"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/domain/booking"
)

const testKey = "cal_test_key"

// apiFixture is a fake Cal.com and a client of it whose waits are recorded, not slept.
type apiFixture struct {
	fake  *calcomapi.Server
	clock *providertest.Clock
	api   *calcom.API
	mu    sync.Mutex
	// retryAfter holds the Retry-After of each 429 the client received.
	retryAfter []string
}

func newFixture(t *testing.T, pageSize int) *apiFixture {
	t.Helper()
	f := &apiFixture{clock: providertest.NewClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))}
	fake, err := calcomapi.Start(calcomapi.Config{Key: testKey, Now: f.clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, fake.Close()) })
	f.fake = fake
	f.api = f.client(testKey, pageSize)
	return f
}

func (f *apiFixture) client(key string, pageSize int) *calcom.API {
	return calcom.NewAPI(calcom.APIConfig{
		Key: key, URL: f.fake.URL(), PageSize: pageSize,
		Client: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			resp, err := http.DefaultTransport.RoundTrip(r)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests {
				f.mu.Lock()
				f.retryAfter = append(f.retryAfter, resp.Header.Get("Retry-After"))
				f.mu.Unlock()
			}
			return resp, err
		})},
		Sleep: f.clock.Sleep,
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (rt roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return rt(r) }

// add seeds a 30-minute booking of host 1842 starting at start.
func (f *apiFixture) add(t *testing.T, uid string, start time.Time) calcomapi.Booking {
	t.Helper()
	b, err := f.fake.Add(calcomapi.Booking{
		UID: uid, Start: start, End: start.Add(30 * time.Minute),
		Host:      calcomapi.Person{ID: 1842, Name: "Grace Hopper", Email: "grace@example.com"},
		Attendees: []calcomapi.Person{{Name: "Ada Lovelace", Email: "ada@example.com"}},
	})
	require.NoError(t, err)
	return b
}

// sync runs one sync and returns its pages.
func (f *apiFixture) sync(t *testing.T, w providers.SyncWindow) []providers.SyncPage {
	t.Helper()
	var pages []providers.SyncPage
	require.NoError(t, f.api.Sync(context.Background(), w, func(p providers.SyncPage) error {
		pages = append(pages, p)
		return nil
	}))
	return pages
}

func refs(pages []providers.SyncPage) []string {
	var out []string
	for _, p := range pages {
		for _, it := range p.Items {
			out = append(out, it.Ref)
		}
	}
	return out
}

var day = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func window() providers.SyncWindow {
	return providers.SyncWindow{From: day, To: day.AddDate(0, 0, 7)}
}

func TestSyncReadsEveryPageInStartOrder(t *testing.T) {
	f := newFixture(t, 2)
	for i := 4; i >= 0; i-- { // created in reverse start order: the answer is sorted by start
		f.add(t, fmt.Sprintf("b%d", i), day.Add(time.Duration(9+i)*time.Hour))
	}
	f.add(t, "outside", day.AddDate(0, 0, 8))

	pages := f.sync(t, window())
	require.Len(t, pages, 3)
	assert.Equal(t, []string{"booking b0", "booking b1", "booking b2", "booking b3", "booking b4"}, refs(pages))
	assert.Equal(t, 3, f.fake.Requests(), "one request a page")
	for _, p := range pages {
		for _, it := range p.Items {
			require.NoError(t, it.Err)
			require.Len(t, it.Mapped.Events, 1, it.Ref)
			assert.Equal(t, "calcom-"+it.Ref[len("booking "):], string(it.Mapped.Events[0].Booking))
			var body struct {
				UID   string `json:"uid"`
				Title string `json:"title"`
			}
			require.NoError(t, json.Unmarshal(it.Body, &body))
			assert.Equal(t, "booking "+body.UID, it.Ref, "the body is the booking as returned")
			assert.NotEmpty(t, body.Title, "undecoded fields are kept")
		}
	}
}

func TestSyncWaitsAsLongAsTheRateLimitSays(t *testing.T) {
	f := newFixture(t, 2)
	for i := range 3 {
		f.add(t, fmt.Sprintf("b%d", i), day.Add(time.Duration(9+i)*time.Hour))
	}
	f.clock.Advance(15 * time.Second)
	f.fake.SetBudget(1, time.Minute) // the second page is refused until the minute is over

	pages := f.sync(t, window())
	assert.Equal(t, []string{"booking b0", "booking b1", "booking b2"}, refs(pages))
	require.Len(t, f.retryAfter, 1)
	secs, err := strconv.Atoi(f.retryAfter[0])
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{time.Duration(secs) * time.Second}, f.clock.Waits(), "the wait is the Retry-After")
	assert.Equal(t, time.Minute, f.clock.Waits()[0])
	assert.Equal(t, 3, f.fake.Requests(), "page 1, the 429, page 2 again")
}

func TestAPIErrorsCarryTheirSentinel(t *testing.T) {
	f := newFixture(t, 10)
	f.add(t, "b0", day.Add(9*time.Hour))
	tests := []struct {
		name string
		key  string
		call func(*calcom.API) error
		want error
	}{
		{"sync with a wrong key", "cal_test_wrong", func(a *calcom.API) error {
			return a.Sync(context.Background(), window(), func(providers.SyncPage) error { return nil })
		}, providers.ErrAPIAuth},
		{"list with a key that is not an API key", "not-a-cal-key", func(a *calcom.API) error {
			_, err := a.List(context.Background())
			return err
		}, providers.ErrAPIAuth},
		{"connect with a wrong key", "cal_live_wrong", func(a *calcom.API) error {
			_, err := a.Connect(context.Background(), "https://ledger.example.com/webhooks/calcom", "s")
			return err
		}, providers.ErrAPIAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(f.client(tt.key, 10))
			require.ErrorIs(t, err, tt.want)
			var apiErr *providers.APIError
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, http.StatusUnauthorized, apiErr.Status)
			assert.Equal(t, "Invalid Access Token.", apiErr.Message, "Cal.com's own message")
			assert.NotContains(t, err.Error(), tt.key)
		})
	}

	t.Run("a page callback's error stops the sync", func(t *testing.T) {
		stop := fmt.Errorf("stop")
		err := f.api.Sync(context.Background(), window(), func(providers.SyncPage) error { return stop })
		assert.ErrorIs(t, err, stop)
	})
}

func TestPeriodicRunReadsWhatChangedSinceTheCursor(t *testing.T) {
	f := newFixture(t, 10)
	for i := range 3 {
		f.add(t, fmt.Sprintf("b%d", i), day.Add(time.Duration(9+i)*time.Hour))
		f.clock.Advance(time.Minute)
	}
	first := f.sync(t, window())
	require.Len(t, first, 1)
	cursor := first[0].Cursor
	require.Equal(t, "2026-11-02T09:02:00.000Z", cursor, "the latest updatedAt seen")

	f.clock.Advance(time.Hour)
	require.NoError(t, f.fake.Cancel("b0", "", ""))
	before := f.fake.Requests()
	pages := f.sync(t, providers.SyncWindow{Cursor: cursor})
	require.Len(t, pages, 1)
	assert.Equal(t, []string{"booking b2", "booking b0"}, refs(pages),
		"by updatedAt: b2 is the cursor's own booking (the filter is inclusive), b0 changed; b1 is not read")
	assert.Equal(t, 1, f.fake.Requests()-before)
	assert.Equal(t, "2026-11-02T10:03:00.000Z", pages[0].Cursor)
	assert.Equal(t, first[0].Items[2].Mapped.Events, pages[0].Items[0].Mapped.Events, "the unchanged booking maps to the same events: duplicates")
	b0 := pages[0].Items[1].Mapped.Events
	require.Len(t, b0, 2)
	assert.Equal(t, first[0].Items[0].Mapped.Events[0], b0[0], "its creation is the one read before")
	assert.IsType(t, booking.Canceled{}, b0[1].Payload)
	assert.Equal(t, f.clock.Now(), b0[1].OccurredAt, "a cancel happened at the booking's updatedAt")

	t.Run("a cursor that is no time is refused", func(t *testing.T) {
		err := f.api.Sync(context.Background(), providers.SyncWindow{Cursor: "yesterday"}, func(providers.SyncPage) error { return nil })
		assert.Error(t, err)
	})
}

func TestAQuietRunCostsOneRequestPerPage(t *testing.T) {
	f := newFixture(t, 2)
	for i := range 3 {
		f.add(t, fmt.Sprintf("b%d", i), day.Add(time.Duration(9+i)*time.Hour))
		f.clock.Advance(time.Minute)
	}
	_, err := f.fake.Reschedule("b0", "b0-new", day.Add(20*time.Hour), day.Add(20*time.Hour+30*time.Minute))
	require.NoError(t, err)
	first := f.sync(t, window())

	before := f.fake.Requests()
	again := f.sync(t, window())
	assert.Equal(t, 2, len(again))
	assert.Equal(t, 2, f.fake.Requests()-before, "one request a page: the reschedule's successor is on a page")
	assert.Equal(t, events(first), events(again), "nothing changed: the same events")

	before = f.fake.Requests()
	periodic := f.sync(t, providers.SyncWindow{Cursor: again[len(again)-1].Cursor})
	assert.Equal(t, 1, f.fake.Requests()-before)
	assert.Equal(t, []string{"booking b0", "booking b0-new"}, refs(periodic), "the reschedule's two bookings share the latest updatedAt")
}

func events(pages []providers.SyncPage) []booking.Event {
	var out []booking.Event
	for _, p := range pages {
		for _, it := range p.Items {
			out = append(out, it.Mapped.Events...)
		}
	}
	return out
}
