package ui

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"bookingledger/adapters/relay"
)

// Relay is what the endpoints pages and the timeline's deliveries read and do: the relay's own
// administration (*relay.Relay implements it, as it implements relayapi.Admin), so the pages, the API
// and the CLI share one selection, one retry and one replay.
type Relay interface {
	Endpoints(ctx context.Context) ([]relay.Endpoint, error)
	Endpoint(ctx context.Context, id int64) (relay.Endpoint, error)
	Deliveries(ctx context.Context, q relay.DeliveryQuery) ([]relay.Delivery, error)
	DeliveryWithAttempts(ctx context.Context, id int64) (relay.Delivery, []relay.Attempt, error)
	RetryDelivery(ctx context.Context, id int64) (relay.Replay, error)
	PlanReplay(ctx context.Context, q relay.ReplayQuery) (relay.ReplayPlan, error)
	StartReplay(ctx context.Context, q relay.ReplayQuery) (relay.Replay, relay.ReplayPlan, error)
	ReplayStatus(ctx context.Context, id int64) (relay.Replay, error)
	EndpointBacklog(ctx context.Context, id int64) (relay.Backlog, error)
	EnableAndSendMissed(ctx context.Context, id int64) (relay.Endpoint, int, error)
}

// The relay's pages are under /ui/admin/, which auth.Required makes admin-only for every method,
// as /api/admin/ is: a read token sees a booking's deliveries on its timeline, not the endpoints.
const endpointsPath = "/ui/admin/endpoints"

// endpointLog bounds the deliveries an endpoint's page shows (with their attempts), newest first.
const endpointLog = 50

// shownResponse bounds the receiver's answer shown per attempt (the relay stores the first 1 KiB).
const shownResponse = 300

var deliveryStates = []string{relay.StatePending, relay.StatePaused, relay.StateSucceeded, relay.StateDead}

func (s *server) registerRelay(mux Mux) {
	mux.HandleFunc("GET "+endpointsPath, s.endpoints)
	mux.HandleFunc("GET "+endpointsPath+"/{id}", s.endpoint)
	mux.HandleFunc("GET "+endpointsPath+"/{id}/replay", s.replayPlan)
	mux.HandleFunc("POST "+endpointsPath+"/{id}/replay", s.replayStart)
	mux.HandleFunc("POST "+endpointsPath+"/{id}/enable", s.enableSendMissed)
	mux.HandleFunc("POST /ui/admin/deliveries/{id}/retry", s.retry)
	mux.HandleFunc("GET /ui/admin/replays/{id}", s.replayProgress)
}

func (s *server) endpoints(w http.ResponseWriter, r *http.Request) {
	eps, err := s.Relay.Endpoints(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "endpoints", "Sent: endpoints", eps)
}

type endpointData struct {
	Endpoint relay.Endpoint
	State    string
	States   []string
	Rows     []deliveryRow
	More     bool
	Retried  string
	// Backlog is what the endpoint has waiting; Breaker its breaker ("closed", "open", "off");
	// Enabled how many deliveries an enable-and-send-missed just resumed ("": none done).
	Backlog relay.Backlog
	Breaker string
	Enabled string
	// From and To prefill the replay form: the last 24 hours.
	From, To string
}

type deliveryRow struct {
	relay.Delivery
	Log []attemptRow
}

type attemptRow struct {
	relay.Attempt
	Shown string
}

func pathID(r *http.Request, what string) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, errBadRequestf(what + " id must be a positive integer")
	}
	return id, nil
}

func (s *server) endpoint(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "endpoint")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	d := endpointData{State: q.Get("state"), States: deliveryStates, Retried: q.Get("retried"), Enabled: q.Get("enabled")}
	if _, err := strconv.Atoi(d.Enabled); d.Enabled != "" && err != nil {
		d.Enabled = ""
	}
	if d.State != "" && !slices.Contains(deliveryStates, d.State) {
		s.fail(w, r, errBadRequestf("state must be one of "+strings.Join(deliveryStates, ", ")))
		return
	}
	if d.Endpoint, err = s.Relay.Endpoint(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	if d.Backlog, err = s.Relay.EndpointBacklog(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	switch {
	case d.Endpoint.BreakerFailures == 0:
		d.Breaker = "off"
	case d.Endpoint.BreakerOpen():
		d.Breaker = "open"
	default:
		d.Breaker = "closed"
	}
	ds, err := s.Relay.Deliveries(r.Context(), relay.DeliveryQuery{EndpointID: id, State: d.State, Limit: endpointLog + 1})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(ds) > endpointLog {
		ds, d.More = ds[:endpointLog], true
	}
	for _, dl := range ds {
		_, as, err := s.Relay.DeliveryWithAttempts(r.Context(), dl.ID)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		row := deliveryRow{Delivery: dl}
		for _, a := range as {
			shown := a.Error
			if shown == "" {
				shown = a.Response
			}
			if len(shown) > shownResponse {
				shown = strings.ToValidUTF8(shown[:shownResponse], "") + "…"
			}
			row.Log = append(row.Log, attemptRow{Attempt: a, Shown: shown})
		}
		d.Rows = append(d.Rows, row)
	}
	now := s.Clock().UTC().Truncate(time.Minute)
	d.From, d.To = now.Add(-24*time.Hour).Format(formTime), now.Add(time.Minute).Format(formTime)
	s.render(w, r, http.StatusOK, "endpoint", "Sent to endpoint #"+strconv.FormatInt(id, 10), d)
}

// enableSendMissed enables the endpoint and sends its paused deliveries (in order on an ordered
// endpoint), as 'bookingledger endpoints enable ID --send-missed'.
func (s *server) enableSendMissed(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "endpoint")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	_, n, err := s.Relay.EnableAndSendMissed(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, endpointsPath+"/"+strconv.FormatInt(id, 10)+"?enabled="+strconv.Itoa(n), http.StatusSeeOther)
}

func (s *server) retry(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "delivery")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rep, err := s.Relay.RetryDelivery(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, endpointsPath+"/"+strconv.FormatInt(rep.EndpointID, 10)+"?retried="+strconv.FormatInt(id, 10), http.StatusSeeOther)
}

// formTime is the value of an <input type="datetime-local">, read as UTC.
const formTime = "2006-01-02T15:04"

type replayData struct {
	Endpoint   relay.Endpoint
	From, To   string
	Types      string
	OnlyFailed bool
	Plan       relay.ReplayPlan
}

// replayQuery reads the replay form (the dry run's query string, or the confirmation's body).
func replayQuery(id int64, v url.Values) (relay.ReplayQuery, replayData, error) {
	d := replayData{From: v.Get("from"), To: v.Get("to"), Types: v.Get("types"), OnlyFailed: v.Get("only_failed") == "on"}
	q := relay.ReplayQuery{EndpointID: id, OnlyFailed: d.OnlyFailed}
	for _, f := range []struct {
		name, value string
		into        *time.Time
	}{{"from", d.From, &q.From}, {"to", d.To, &q.To}} {
		t, err := time.Parse(formTime, f.value)
		if err != nil {
			if t, err = time.Parse(time.RFC3339, f.value); err != nil {
				return q, d, errBadRequestf(f.name + " must be a time like 2026-12-01T08:00 (UTC)")
			}
		}
		*f.into = t.UTC()
	}
	types, err := relay.ParseTypes(d.Types)
	if err != nil {
		return q, d, err // relay.ErrInvalidTypes: a bad request, its message alone on the page
	}
	q.Types = types
	return q, d, nil
}

// replayPlan is the dry run: what the replay would send, with the form that confirms it.
func (s *server) replayPlan(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "endpoint")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, d, err := replayQuery(id, r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if d.Plan, err = s.Relay.PlanReplay(r.Context(), q); err != nil {
		s.fail(w, r, err)
		return
	}
	if d.Endpoint, err = s.Relay.Endpoint(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "replay", "Replay to endpoint #"+strconv.FormatInt(id, 10)+": dry run", d)
}

func (s *server) replayStart(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "endpoint")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, errBadRequestf("form: "+err.Error()))
		return
	}
	q, _, err := replayQuery(id, r.PostForm)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rep, _, err := s.Relay.StartReplay(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/ui/admin/replays/"+strconv.FormatInt(rep.ID, 10), http.StatusSeeOther)
}

func (s *server) replayProgress(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "replay")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rep, err := s.Relay.ReplayStatus(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "progress", "Replay #"+strconv.FormatInt(id, 10), rep)
}
