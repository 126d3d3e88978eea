package acuity_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/acuity"
	"bookingledger/adapters/providers/acuity/acuitysink"
	"bookingledger/adapters/providers/acuity/acuitytest"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/domain/booking"
)

const syncKey = "sync-api-key"

type syncFixture struct {
	sink  *acuitysink.Server
	clock *providertest.Clock
	api   *acuity.API
	lists []string // minDate..maxDate of each list request, in order
	mu    sync.Mutex
}

func newSyncFixture(t *testing.T, now time.Time, max, rate int) *syncFixture {
	t.Helper()
	f := &syncFixture{clock: providertest.NewClock(now)}
	sink, err := acuitysink.Start(acuitysink.Config{RatePerSecond: rate, Now: f.clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sink.Close()) })
	f.sink = sink
	client := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/appointments") {
			f.mu.Lock()
			f.lists = append(f.lists, r.URL.Query().Get("minDate")+".."+r.URL.Query().Get("maxDate"))
			f.mu.Unlock()
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	f.api, err = acuity.NewAPI(acuity.Config{Keys: providers.NewSecrets(syncKey), UserID: userID, APIURL: sink.URL(), Client: client},
		acuity.APIOptions{Max: max, Sleep: f.clock.Sleep, Now: f.clock.Now})
	require.NoError(t, err)
	return f
}

func (f *syncFixture) Lists() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.lists...)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (rt roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return rt(r) }

func syncAll(t *testing.T, src *acuity.API, w providers.SyncWindow) ([]providers.SyncPage, error) {
	t.Helper()
	var pages []providers.SyncPage
	err := src.Sync(context.Background(), w, func(p providers.SyncPage) error {
		pages = append(pages, p)
		return nil
	})
	return pages, err
}

func items(pages []providers.SyncPage) map[string]providers.SyncItem {
	out := map[string]providers.SyncItem{}
	for _, p := range pages {
		for _, it := range p.Items {
			out[it.Ref] = it
		}
	}
	return out
}

// The webhook path (verify, fetch, map at the receipt time) and the sync (list, map at the list
// time) give the same events — IDs, types, bookings, payloads, times — and contacts for the same
// state; only the delivery differs ("acuity:sync:<id>"). A different observation time changes the
// events' times, never their IDs.
func TestSyncMapsAsTheWebhookAndFetch(t *testing.T) {
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	day := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		a    acuitysink.Appointment
	}{
		{"scheduled", acuitysink.Appointment{Start: day.Add(9 * time.Hour), Minutes: 30, CalendarID: 1}},
		{"moved to another calendar", acuitysink.Appointment{Start: day.Add(15 * time.Hour), Minutes: 45, CalendarID: 7}},
		{"canceled", acuitysink.Appointment{Start: day.Add(9 * time.Hour), Minutes: 30, CalendarID: 1, Canceled: true}},
		{"no-show", acuitysink.Appointment{Start: day.Add(9 * time.Hour), Minutes: 30, CalendarID: 1, NoShow: true}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSyncFixture(t, at, 0, 1000)
			id := strconv.Itoa(500 + i)
			f.sink.Put(id, tt.a)
			p, err := acuity.New(acuity.Config{Keys: providers.NewSecrets(syncKey), UserID: userID, APIURL: f.sink.URL()})
			require.NoError(t, err)
			body := formBody("appointment.changed", id)
			webhook, err := p.Map(context.Background(), sigHeader(acuity.Sign(syncKey, body)), body, at)
			require.NoError(t, err)
			require.NotEmpty(t, webhook.Events)

			pages, err := syncAll(t, f.api, providers.SyncWindow{From: day, To: day.Add(24 * time.Hour)})
			require.NoError(t, err)
			item, ok := items(pages)["appointment "+id]
			require.True(t, ok, "%+v", pages)
			require.NoError(t, item.Err)
			assert.Equal(t, webhook.Events, item.Mapped.Events)
			assert.Equal(t, webhook.Contacts, item.Mapped.Contacts)
			assert.Equal(t, "acuity:sync:"+id, item.Mapped.DeliveryID)
			assert.Contains(t, string(item.Body), `"id":`+id)

			require.NoError(t, f.clock.Sleep(context.Background(), time.Hour))
			later, err := syncAll(t, f.api, providers.SyncWindow{From: day, To: day.Add(24 * time.Hour)})
			require.NoError(t, err)
			again := items(later)["appointment "+id]
			require.Len(t, again.Mapped.Events, len(webhook.Events))
			for j, ev := range again.Mapped.Events {
				assert.Equal(t, webhook.Events[j].ID, ev.ID, "observed later: the same event IDs, so duplicates")
			}
		})
	}
}

// Acuity's own document (every field a real answer carries, a seat in a class, an offset without a
// colon) maps alike through the fetch and the list; a listed appointment that will not parse is an
// item with an ErrUnmappable error, not a failed sync.
func TestSyncOfAcuitysDocumentAndABrokenOne(t *testing.T) {
	a := appt(baseState())
	a.ClassID = 99
	fetchAPI := acuitytest.New(t, userID, syncKey)
	fetchAPI.Put(a)
	broken := `{"id":77,"datetime":"2025-06-30T12:00:00+0100","duration":"0","calendarID":1}`
	list := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, k, ok := r.BasicAuth(); !ok || u != userID || k != syncKey || r.URL.Path != "/appointments" {
			http.Error(w, `{"status_code":401,"message":"Unauthorized","error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "[%s,%s]", a.JSON(), broken)
	}))
	t.Cleanup(list.Close)

	at := time.Date(2025, 6, 20, 9, 0, 0, 0, time.UTC)
	h, body := signed(syncKey, "rescheduled")
	webhook, err := newProvider(t, fetchAPI, syncKey).Map(context.Background(), h, body, at)
	require.NoError(t, err)
	api, err := acuity.NewAPI(acuity.Config{Keys: providers.NewSecrets(syncKey), UserID: userID, APIURL: list.URL}, acuity.APIOptions{Now: func() time.Time { return at }})
	require.NoError(t, err)
	pages, err := syncAll(t, api, providers.SyncWindow{From: at, To: at.Add(30 * 24 * time.Hour)})
	require.NoError(t, err)
	got := items(pages)
	require.Len(t, got, 2)
	item := got["appointment "+apptID]
	require.NoError(t, item.Err)
	assert.Equal(t, webhook.Events, item.Mapped.Events)
	assert.Equal(t, webhook.Contacts, item.Mapped.Contacts)
	assert.Equal(t, "acuity-class-99", item.Mapped.Events[0].Payload.(booking.Rescheduled).Slot.Meeting)
	assert.ErrorIs(t, got["appointment 77"].Err, providers.ErrUnmappable)
	assert.Empty(t, got["appointment 77"].Mapped.Events)
}

// Ten appointments over five days with max=4: the full answers are split in halves until each fits;
// every appointment is read once. A window where nothing changed costs the same requests again.
func TestSyncSplitsAFullWindow(t *testing.T) {
	f := newSyncFixture(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 4, 1000)
	for i := range 10 {
		start := time.Date(2026, 12, 2+i/2, 9+i%2, 0, 0, 0, time.UTC) // two a day, Dec 2 to 6
		f.sink.Put(strconv.Itoa(100+i), acuitysink.Appointment{Start: start, Minutes: 30, CalendarID: 1, Canceled: i == 3})
	}
	w := providers.SyncWindow{From: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	pages, err := syncAll(t, f.api, w)
	require.NoError(t, err)
	got := items(pages)
	assert.Len(t, got, 10, "Dec 2 to 6: the window widened by a day on each side")
	n := 0
	for _, p := range pages {
		n += len(p.Items)
		assert.Empty(t, p.Cursor)
	}
	assert.Equal(t, 10, n, "each appointment once")
	assert.Contains(t, got, "appointment 103", "canceled ones too (showall)")
	want := []string{
		"2026-12-02..2026-12-06", // 10 ≥ 4: split
		"2026-12-02..2026-12-03", // 4 ≥ 4: split
		"2026-12-02..2026-12-02",
		"2026-12-03..2026-12-03",
		"2026-12-04..2026-12-06", // 6: split
		"2026-12-04..2026-12-04",
		"2026-12-05..2026-12-06", // 4: split
		"2026-12-05..2026-12-05",
		"2026-12-06..2026-12-06",
	}
	assert.Equal(t, want, f.Lists())

	before := f.sink.Requests()
	_, err = syncAll(t, f.api, w)
	require.NoError(t, err)
	assert.Equal(t, len(want), f.sink.Requests()-before, "nothing changed: the same requests, no fetch per appointment")
}

func TestSyncOfAFullDayFails(t *testing.T) {
	f := newSyncFixture(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 2, 1000)
	for i := range 3 {
		f.sink.Put(strconv.Itoa(200+i), acuitysink.Appointment{Start: time.Date(2026, 12, 2, 9+i, 0, 0, 0, time.UTC), Minutes: 30, CalendarID: 1})
	}
	day := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	_, err := syncAll(t, f.api, providers.SyncWindow{From: day, To: day})
	require.Error(t, err)
	assert.ErrorIs(t, err, acuity.ErrSyncDayFull)
	assert.Contains(t, err.Error(), "2026-12-02")

	_, err = syncAll(t, f.api, providers.SyncWindow{From: day})
	assert.Error(t, err, "a window needs an end: Acuity lists by date")
}

// A 429 is waited out (the client's backoff: Acuity documents no Retry-After) and the list read again.
func TestAcuitySyncWaitsOutTheRateLimit(t *testing.T) {
	f := newSyncFixture(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 2, 1)
	for i := range 3 {
		f.sink.Put(strconv.Itoa(300+i), acuitysink.Appointment{Start: time.Date(2026, 12, 2+i, 9, 0, 0, 0, time.UTC), Minutes: 30, CalendarID: 1})
	}
	pages, err := syncAll(t, f.api, providers.SyncWindow{From: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	assert.Len(t, items(pages), 3)
	assert.NotEmpty(t, f.clock.Waits())
	for _, d := range f.clock.Waits() {
		assert.Equal(t, time.Second, d, "each refused request waits the first backoff, then the next second has budget")
	}
	assert.Equal(t, len(f.Lists()), f.sink.Requests(), "every request was a list")
	assert.Equal(t, 5, len(f.Lists())-len(f.clock.Waits()), "Dec 2-4 full, Dec 2, Dec 3-4 full, Dec 3, Dec 4 got through")
}

func TestAcuityAPIErrorsCarryTheirSentinel(t *testing.T) {
	fake := acuitytest.New(t, userID, "the-real-key")
	api, err := acuity.NewAPI(acuity.Config{Keys: providers.NewSecrets("a-wrong-key"), UserID: userID, APIURL: fake.URL}, acuity.APIOptions{})
	require.NoError(t, err)
	_, err = syncAll(t, api, providers.SyncWindow{From: time.Now(), To: time.Now()})
	assert.ErrorIs(t, err, providers.ErrAPIAuth)
	assert.NotContains(t, err.Error(), "a-wrong-key")
	_, err = api.List(context.Background())
	assert.ErrorIs(t, err, providers.ErrAPIAuth)

	_, err = acuity.NewAPI(acuity.Config{UserID: userID}, acuity.APIOptions{})
	assert.Error(t, err, "no key, no API")
}

func TestAcuityConnectCreatesThenLeavesAloneThenCompletes(t *testing.T) {
	const target = "https://ledger.example.com/webhooks/acuity"
	ctx := context.Background()
	f := newSyncFixture(t, time.Now(), 0, 1000)

	res, err := f.api.Connect(ctx, target, "unused")
	require.NoError(t, err)
	assert.Equal(t, providers.ConnectCreated, res.Action)
	assert.Equal(t, acuity.SubscriptionEvents(), res.Subscription.Events)
	assert.Empty(t, res.Secret, "Acuity signs with the API key")
	subs, err := f.api.List(ctx)
	require.NoError(t, err)
	require.Len(t, subs, 4)
	for _, s := range subs {
		assert.Equal(t, target, s.URL)
		assert.Equal(t, providers.SubscriptionActive, s.State)
	}

	before := f.sink.Requests()
	again, err := f.api.Connect(ctx, target, "")
	require.NoError(t, err)
	assert.Equal(t, providers.ConnectUnchanged, again.Action)
	assert.Equal(t, res.Subscription.ID, again.Subscription.ID)
	assert.Equal(t, before+1, f.sink.Requests(), "the second run only lists")

	// Acuity stopped one (a stopped webhook is not listed): Connect creates it alone.
	del, err := http.NewRequest(http.MethodDelete, f.sink.URL()+"/webhooks/"+subs[1].ID, nil)
	require.NoError(t, err)
	del.SetBasicAuth(userID, syncKey)
	resp, err := http.DefaultClient.Do(del)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	fixed, err := f.api.Connect(ctx, target, "")
	require.NoError(t, err)
	assert.Equal(t, providers.ConnectUpdated, fixed.Action)
	assert.ElementsMatch(t, acuity.SubscriptionEvents(), fixed.Subscription.Events)
	subs, err = f.api.List(ctx)
	require.NoError(t, err)
	assert.Len(t, subs, 4)
}

func TestAcuityConnectReportsTheLimit(t *testing.T) {
	ctx := context.Background()
	f := newSyncFixture(t, time.Now(), 0, 1000)
	for i := range 6 { // 24 webhooks
		_, err := f.api.Connect(ctx, fmt.Sprintf("https://other%d.example.com/", i), "")
		require.NoError(t, err)
	}
	_, err := f.api.Connect(ctx, "https://ledger.example.com/webhooks/acuity", "")
	assert.ErrorIs(t, err, providers.ErrAPIRequest, "Acuity allows 25 webhooks")
	assert.Contains(t, err.Error(), "maximum of 25")
	subs, err := f.api.List(ctx)
	require.NoError(t, err)
	assert.Len(t, subs, acuitysink.MaxWebhooks, "the one that fit was created; the next Connect creates only the rest")
}
