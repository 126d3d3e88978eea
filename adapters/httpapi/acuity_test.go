package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/acuity"
	"bookingledger/adapters/providers/acuity/acuitytest"
	"bookingledger/domain/ledger"
)

const (
	acuityUser = "11145481"
	acuityKey  = "test-acuity-api-key"
	acuityAppt = "1148237562"
)

var _ httpapi.Deferrer = (*jobs.Queue)(nil)

type acuityServer struct {
	*testServer
	api   *acuitytest.Server
	queue *jobs.Queue
}

type fixedRetry time.Duration

func (f fixedRetry) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(time.Duration(f)) }

// newAcuityServer starts the ingress with the acuity provider against a fake Acuity API, over a
// database migrated for us and for River; withQueue decides whether the ledger can defer.
func newAcuityServer(t *testing.T, withQueue bool) *acuityServer {
	t.Helper()
	return newAcuityServerOn(t, riverSpares.Database(t), withQueue)
}

func newAcuityServerOn(t *testing.T, pool *pgxpool.Pool, withQueue bool) *acuityServer {
	t.Helper()
	s := &acuityServer{
		testServer: &testServer{DBURL: pool.Config().ConnString(), Pool: pool, Registry: prometheus.NewRegistry(),
			Clock: &fakeClock{now: time.Date(2025, 6, 2, 19, 5, 0, 0, time.UTC)}, Logs: &syncBuffer{}},
		api: acuitytest.New(t, acuityUser, acuityKey),
	}
	p, err := acuity.New(acuity.Config{Keys: providers.NewSecrets(acuityKey), UserID: acuityUser, APIURL: s.api.URL,
		Attempts: 2, AttemptTimeout: time.Second, Budget: 2 * time.Second, Backoff: 10 * time.Millisecond})
	require.NoError(t, err)
	log := slog.New(slog.NewJSONHandler(s.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s.Stores = newStores(t, pool)
	svc := ledger.NewService(s.Stores.Ledger, eventcodec.JSON{})
	var deferrer httpapi.Deferrer // none: a delivery that cannot be fetched is a 503
	if withQueue {
		s.queue, err = jobs.New(jobs.Config{Pool: pool, Ledger: svc, Receipts: s.Stores.Receipts, Refetchers: []jobs.Refetcher{p}, Logger: log,
			MaxAttempts: 3, RetryPolicy: fixedRetry(10 * time.Millisecond), PollInterval: 50 * time.Millisecond,
			StopTimeout: 2 * time.Second, Clock: s.Clock.Now})
		require.NoError(t, err)
		deferrer = s.queue
	}
	srv, err := httpapi.New(httpapi.Config{
		Ledger:                  svc,
		Deferrer:                deferrer,
		Providers:               []providers.Provider{p},
		Ready:                   httpapi.CheckFunc(func(context.Context) error { return nil }),
		Logger:                  log,
		Registry:                s.Registry,
		Clock:                   s.Clock.Now,
		RejectReceiptsPerMinute: 100,
		RecordTimeout:           recordTimeout,
	})
	require.NoError(t, err)
	s.Server = srv
	s.listen(t)
	return s
}

// put sets the appointment's state at the fake API.
func (s *acuityServer) put(t *testing.T, start time.Time, canceled bool) {
	t.Helper()
	id, err := strconv.ParseInt(acuityAppt, 10, 64)
	require.NoError(t, err)
	s.api.Put(acuitytest.Appointment{ID: id, Start: start, Duration: 30 * time.Minute, CalendarID: 4417311,
		AppointmentTypeID: 21870436, Canceled: canceled, Created: time.Date(2025, 6, 2, 14, 3, 11, 0, time.FixedZone("", -5*3600))})
}

// deliver posts a signed Acuity webhook (built by sample, as `bookingledger send` does) and returns
// the answer.
func (s *acuityServer) deliver(t *testing.T, action string) reply {
	t.Helper()
	d, err := sample.Build(acuity.Name, action, acuityKey, sample.Params{Booking: acuityAppt}, s.Clock.Now())
	require.NoError(t, err)
	return s.send(t, d)
}

func (s *acuityServer) appointmentTypes(t *testing.T) []string {
	t.Helper()
	return s.streamTypes(t, "booking-acuity-"+acuityAppt)
}

func TestAcuityRescheduledAppointmentStaysOneBookingThroughTheServer(t *testing.T) {
	parallel(t)
	s := newAcuityServer(t, true)
	plus1 := time.FixedZone("", 3600)
	steps := []struct {
		action   string
		start    time.Time
		canceled bool
		appended []string
	}{
		{"scheduled", time.Date(2025, 6, 30, 10, 15, 0, 0, plus1), false, []string{"booking.rescheduled.v1", "booking.scheduled.v1"}},
		{"rescheduled", time.Date(2025, 7, 2, 15, 30, 0, 0, plus1), false, []string{"booking.rescheduled.v1"}},
		{"rescheduled", time.Date(2025, 7, 4, 9, 0, 0, 0, plus1), false, []string{"booking.rescheduled.v1"}},
		{"canceled", time.Date(2025, 7, 4, 9, 0, 0, 0, plus1), true, []string{"booking.canceled.v1"}},
	}
	var want []string
	for i, st := range steps {
		s.put(t, st.start, st.canceled)
		r := s.deliver(t, st.action)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, "accepted", r.JSON(t)["status"], "step %d", i)
		assert.Equal(t, "acuity-"+acuityAppt, r.JSON(t)["booking"])
		dup := s.deliver(t, "changed")
		require.Equal(t, http.StatusOK, dup.Status, "%s", dup.Body)
		assert.Equal(t, "duplicate", dup.JSON(t)["status"], "step %d: the changed next to %s", i, st.action)
		want = append(want, st.appended...)
		assert.Equal(t, want, s.appointmentTypes(t), "step %d", i)
		s.Clock.Advance(24 * time.Hour)
	}
	// A replay of the first body, a month on: no timestamp is signed, so it verifies; it fetches the
	// canceled state and is recognised.
	s.Clock.Advance(30 * 24 * time.Hour)
	r := s.deliver(t, "scheduled")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "duplicate", r.JSON(t)["status"])
	assert.Equal(t, want, s.appointmentTypes(t))
	assert.Equal(t, 0, s.receipts(t, "deferred"))
	assert.Len(t, s.api.Requests(), 9, "one fetch per delivery")
}

func TestAcuityFetchFailureIsDeferredThenFinishedByRiver(t *testing.T) {
	parallel(t)
	s := newAcuityServer(t, true)
	s.put(t, time.Date(2025, 6, 30, 10, 15, 0, 0, time.FixedZone("", 3600)), false)
	s.api.FailAll(http.StatusServiceUnavailable)

	r := s.deliver(t, "scheduled")
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
	assert.Equal(t, "deferred", r.JSON(t)["status"])
	assert.Contains(t, r.JSON(t)["reason"], "HTTP 503")
	assert.Equal(t, 1, s.receipts(t, "deferred"))
	assert.Equal(t, 1, s.count(t, `SELECT count(*) FROM river_job`))
	assert.Equal(t, 0, s.events(t), "never mapped without data")
	assert.Len(t, s.api.Requests(), 2, "the in-request attempts")
	assert.Equal(t, 1.0, s.metric(t, httpapi.MetricDeliveries, map[string]string{"provider": "acuity", "outcome": "deferred"}))
	// Until the job finishes it, the deferred receipt is the delivery's only record: it names the
	// booking it waits for (the booking's history shows it, and an erasure of the booking finds its
	// body through it), the secret that verified it and the headers that came.
	var pending, deferredSecret string
	var headers []string
	require.NoError(t, s.Pool.QueryRow(context.Background(), `SELECT pending_booking, secret_ref, headers FROM receipts WHERE outcome = 'deferred'`).
		Scan(&pending, &deferredSecret, &headers))
	assert.Equal(t, string(acuity.BookingID(acuityAppt)), pending)
	assert.NotEmpty(t, deferredSecret)
	assert.Contains(t, strings.Join(headers, "\n"), acuity.SignatureHeader+": ")

	// The API stays down for the job's first attempt (one fetch) and answers from then on. Told
	// so before the job starts: recovering once its first failure is seen raced its second attempt,
	// 10 ms later, on a loaded machine ("fetched on attempt 3").
	s.api.Recover()
	s.api.FailNext(1, http.StatusServiceUnavailable)
	events, cancel := s.queue.Client().Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	defer cancel()
	require.NoError(t, s.queue.Start(context.Background()))
	defer func() { assert.NoError(t, s.queue.Stop(context.Background())) }()
	select {
	case ev := <-events:
		require.Equal(t, river.EventKindJobFailed, ev.Kind, "the API is still down")
	case <-time.After(20 * time.Second):
		t.Fatal("no attempt within 20 s")
	}
	for done := false; !done; {
		select {
		case ev := <-events:
			done = ev.Kind == river.EventKindJobCompleted
		case <-time.After(20 * time.Second):
			t.Fatal("the job did not complete within 20 s")
		}
	}

	assert.Equal(t, []string{"booking.rescheduled.v1", "booking.scheduled.v1"}, s.appointmentTypes(t))
	var deferredID int64
	require.NoError(t, s.Pool.QueryRow(context.Background(), `SELECT id FROM receipts WHERE outcome = 'deferred'`).Scan(&deferredID))
	var reason, deliveryID string
	require.NoError(t, s.Pool.QueryRow(context.Background(),
		`SELECT reason, delivery_id FROM receipts WHERE outcome = 'accepted'`).Scan(&reason, &deliveryID))
	assert.Equal(t, fmt.Sprintf("fetched on attempt 2 for deferred receipt %d", deferredID), reason)
	assert.Equal(t, "acuity:scheduled:"+acuityAppt, deliveryID)
	assert.Equal(t, 1, s.count(t, `SELECT count(*) FROM receipts WHERE outcome = 'accepted' AND secret_ref = $1`, deferredSecret),
		"the job records the delivery under the secret that verified it")

	// Acuity's own retry (or a replay) of the same body, now that the API answers: a duplicate.
	again := s.deliver(t, "scheduled")
	require.Equal(t, http.StatusOK, again.Status, "%s", again.Body)
	assert.Equal(t, "duplicate", again.JSON(t)["status"])
}

func TestAcuityWithoutAQueueAFailedFetchIs503(t *testing.T) {
	parallel(t)
	s := newAcuityServer(t, false)
	s.api.FailAll(http.StatusServiceUnavailable)
	r := s.deliver(t, "scheduled")
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	assert.Equal(t, "map_unavailable", r.JSON(t)["code"])
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	assert.Equal(t, 0, s.count(t, `SELECT count(*) FROM receipts`))
}

func TestAcuityDeferralThatCannotCommitIs503WithNothingKept(t *testing.T) {
	parallel(t)
	s := newAcuityServerOn(t, spares.Database(t), true) // River's schema is missing: the job insert fails
	s.api.FailAll(http.StatusServiceUnavailable)
	r := s.deliver(t, "scheduled")
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	assert.Equal(t, 0, s.count(t, `SELECT count(*) FROM receipts`), "the receipt rolled back with the job")
}

func TestAcuityVerificationAndQuarantine(t *testing.T) {
	parallel(t)
	s := newAcuityServer(t, true)
	body := []byte("action=scheduled&id=" + acuityAppt + "&calendarID=4417311&appointmentTypeID=21870436")
	cases := map[string]struct {
		sig  string
		code string
	}{
		"missing":    {"", "missing_header"},
		"not base64": {"%%%", "malformed_header"},
		"other key":  {acuity.Sign("someone-elses-key", body), "bad_signature"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := s.post(t, acuity.Name, header(acuity.SignatureHeader, tc.sig), body)
			assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
			assert.Equal(t, tc.code, r.JSON(t)["code"])
		})
	}
	assert.Empty(t, s.api.Requests(), "nothing is fetched for an unverified request")

	garbage := []byte(`{"action":"scheduled","id":1148237562}`)
	r := s.post(t, acuity.Name, header(acuity.SignatureHeader, acuity.Sign(acuityKey, garbage)), garbage)
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
	assert.Equal(t, "quarantined", r.JSON(t)["status"])

	order := []byte("action=order.completed&id=86512347")
	r = s.post(t, acuity.Name, header(acuity.SignatureHeader, acuity.Sign(acuityKey, order)), order)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "ignored", r.JSON(t)["status"])
	assert.Equal(t, 0, s.events(t))
}
