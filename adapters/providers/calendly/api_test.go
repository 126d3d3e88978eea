package calendly_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/calendly/calendlyapi"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/domain/booking"
)

const fakeToken = "test-calendly-token"

// harness is a client of a running fake; waits are the client's recorded sleeps.
type harness struct {
	fake  *calendlyapi.Server
	api   *calendly.API
	clock *providertest.Clock
}

func newHarness(t *testing.T, cfg calendlyapi.Config) *harness {
	t.Helper()
	h := &harness{clock: providertest.NewClock(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))}
	cfg.Token = fakeToken
	cfg.Now = h.clock.Now
	fake, err := calendlyapi.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, fake.Close()) })
	h.fake = fake
	h.api = h.client(fake.URL(), fakeToken)
	return h
}

func (h *harness) client(url, token string) *calendly.API {
	return calendly.NewAPI(calendly.APIConfig{Token: token, URL: url, Sleep: h.clock.Sleep})
}

func (h *harness) recordedWaits() []time.Duration { return h.clock.Waits() }

// sync runs a sync of [from, to) and returns its pages.
func (h *harness) sync(t *testing.T, from, to time.Time) []providers.SyncPage {
	t.Helper()
	var pages []providers.SyncPage
	err := h.api.Sync(context.Background(), providers.SyncWindow{From: from, To: to}, func(p providers.SyncPage) error {
		pages = append(pages, p)
		return nil
	})
	require.NoError(t, err)
	return pages
}

func allItems(pages []providers.SyncPage) map[string]providers.SyncItem {
	items := map[string]providers.SyncItem{}
	for _, p := range pages {
		for _, it := range p.Items {
			items[it.Ref] = it
		}
	}
	return items
}

var day = time.Date(2026, 12, 10, 0, 0, 0, 0, time.UTC)

// seedOneToOne seeds n thirty-minute meetings on day, a minute apart, and returns their invitees.
func seedOneToOne(h *harness, n int) []calendlyapi.Invitee {
	out := make([]calendlyapi.Invitee, n)
	for i := range out {
		start := day.Add(8*time.Hour + time.Duration(i)*time.Minute)
		out[i] = h.fake.Schedule(calendlyapi.Booking{Start: start, End: start.Add(30 * time.Minute),
			Name: fmt.Sprintf("Invitee %d", i), Email: fmt.Sprintf("invitee%d@example.com", i)})
	}
	return out
}

func TestSyncReadsEveryPageOfEventsAndInvitees(t *testing.T) {
	h := newHarness(t, calendlyapi.Config{})
	single := seedOneToOne(h, 101)
	groupStart := day.Add(20 * time.Hour)
	group := calendlyapi.Booking{Start: groupStart, End: groupStart.Add(time.Hour), Limit: 150}
	first := h.fake.Schedule(group)
	members := []calendlyapi.Invitee{first}
	for i := 1; i < 101; i++ {
		inv, err := h.fake.Join(first.Event, group)
		require.NoError(t, err)
		members = append(members, inv)
	}
	outside := h.fake.Schedule(calendlyapi.Booking{Start: day.Add(48 * time.Hour), End: day.Add(49 * time.Hour)})

	pages := h.sync(t, day, day.Add(24*time.Hour))

	require.Len(t, pages, 2, "102 scheduled events are two pages of 100")
	assert.Len(t, pages[0].Items, 100)
	assert.Len(t, pages[1].Items, 1+101, "the last event and the 101 invitees of the group event")
	items := allItems(pages)
	assert.Len(t, items, 101+101)
	assert.NotContains(t, items, outside.URI, "starts after the window")
	for _, inv := range append(single, members...) {
		it, ok := items[inv.URI]
		if !assert.True(t, ok, inv.URI) {
			continue
		}
		require.NoError(t, it.Err)
		require.Len(t, it.Mapped.Events, 1)
		assert.Equal(t, booking.TypeScheduled, it.Mapped.Events[0].Type())
	}
	groupSlot := items[members[100].URI].Mapped.Events[0].Payload.(booking.Scheduled)
	assert.Equal(t, 150, groupSlot.Capacity)
	assert.Equal(t, 1+2+101+2, h.fake.Requests(), "users/me, 2 event pages, 101 single pages, 2 group pages")
	for _, p := range pages {
		assert.Empty(t, p.Cursor, "Calendly has no resume point")
	}
}

// A sync of a window where nothing changed costs exactly one request per page read: the token's
// user is read once per client, and nothing is read twice.
func TestQuietWindowCostsOneRequestPerPage(t *testing.T) {
	h := newHarness(t, calendlyapi.Config{})
	seedOneToOne(h, 3)
	h.sync(t, day, day.Add(24*time.Hour))

	tests := []struct {
		name     string
		from, to time.Time
		want     int
	}{
		{"three events", day, day.Add(24 * time.Hour), 1 + 3},
		{"empty window", day.Add(-24 * time.Hour), day, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := h.fake.Requests()
			pages := h.sync(t, tt.from, tt.to)
			assert.Equal(t, tt.want, h.fake.Requests()-before)
			assert.Len(t, pages, 1)
		})
	}
}

func TestRateLimitIsWaitedOutByItsResetHeader(t *testing.T) {
	h := newHarness(t, calendlyapi.Config{Budget: 4, Window: time.Minute})
	seeded := seedOneToOne(h, 3)
	// Another client opens the window 17 s before the sync starts.
	req, err := http.NewRequest(http.MethodGet, h.fake.URL()+"/users/me", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+fakeToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "3", resp.Header.Get("X-RateLimit-Remaining"))
	h.clock.Advance(17 * time.Second)

	pages := h.sync(t, day, day.Add(24*time.Hour))

	items := allItems(pages)
	for _, inv := range seeded {
		assert.Contains(t, items, inv.URI)
	}
	// users/me, the event page and one invitee page spend the rest of the budget; the second invitee
	// page is refused with X-RateLimit-Reset: 43, waited exactly that long, and retried.
	assert.Equal(t, []time.Duration{43 * time.Second}, h.recordedWaits())
	assert.Equal(t, 1+1+1+3+1, h.fake.Requests(), "the other client's request, five reads and the one refused")
}

func TestAPIErrorsCarryTheirSentinel(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"title":"Internal Server Error","message":"The server encountered an unexpected condition that prevented it from fulfilling the request."}`))
	}))
	t.Cleanup(failing.Close)

	tests := []struct {
		name      string
		token     string
		url       func(h *harness) string
		want      error
		status    int
		wantWaits []time.Duration
	}{
		{"wrong token", "not-the-token", func(h *harness) string { return h.fake.URL() }, providers.ErrAPIAuth, 401, nil},
		{"server error after retries", fakeToken, func(*harness) string { return failing.URL }, providers.ErrAPIUnavailable, 500,
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, calendlyapi.Config{})
			api := h.client(tt.url(h), tt.token)
			called := false
			err := api.Sync(context.Background(), providers.SyncWindow{From: day, To: day.Add(time.Hour)}, func(providers.SyncPage) error {
				called = true
				return nil
			})
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.want)
			var apiErr *providers.APIError
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, tt.status, apiErr.Status)
			assert.False(t, called)
			assert.Equal(t, tt.wantWaits, h.recordedWaits())
			assert.NotContains(t, err.Error(), tt.token, "credentials never appear in errors")

			_, err = api.List(context.Background())
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

// A member (not an admin) is refused the organization's events: the sync reads the user's own,
// and remembers it, so that a later run spends no request on the refusal.
func TestMemberTokenFallsBackToTheUsersOwnEvents(t *testing.T) {
	h := newHarness(t, calendlyapi.Config{Member: true})
	mine := seedOneToOne(h, 2)
	colleague := h.fake.Schedule(calendlyapi.Booking{Hosts: []string{"https://api.calendly.com/users/COLLEAGUE0000001"},
		Start: day.Add(9 * time.Hour), End: day.Add(10 * time.Hour)})

	items := allItems(h.sync(t, day, day.Add(24*time.Hour)))
	assert.Len(t, items, 2)
	for _, inv := range mine {
		assert.Contains(t, items, inv.URI)
	}
	assert.NotContains(t, items, colleague.URI)
	assert.Equal(t, 1+1+1+2, h.fake.Requests(), "users/me, the refused organization listing, the user's page, two invitee pages")

	before := h.fake.Requests()
	h.sync(t, day, day.Add(24*time.Hour))
	assert.Equal(t, 1+2, h.fake.Requests()-before)
}

// A refusal of one listing does not narrow another: an admin on a plan without webhooks is refused
// the subscriptions in both scopes, and the sync still reads the whole organization.
func TestWebhookRefusalDoesNotNarrowTheSync(t *testing.T) {
	h := newHarness(t, calendlyapi.Config{FreePlan: true})
	colleague := h.fake.Schedule(calendlyapi.Booking{Hosts: []string{"https://api.calendly.com/users/COLLEAGUE0000001"},
		Start: day.Add(9 * time.Hour), End: day.Add(10 * time.Hour)})

	_, err := h.api.List(context.Background())
	require.ErrorIs(t, err, providers.ErrAPIAuth)
	assert.Contains(t, err.Error(), "upgrade")

	assert.Contains(t, allItems(h.sync(t, day, day.Add(24*time.Hour))), colleague.URI)
	before := h.fake.Requests()
	_, err = h.api.List(context.Background())
	require.ErrorIs(t, err, providers.ErrAPIAuth)
	assert.Equal(t, 2, h.fake.Requests()-before, "both scopes are tried again: neither was answered")
}
