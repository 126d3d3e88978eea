package relayapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
)

// Admin is what the handlers need of the relay (*relay.Relay implements it).
type Admin interface {
	AddEndpoint(ctx context.Context, n relay.NewEndpoint) (relay.Endpoint, string, error)
	Endpoints(ctx context.Context) ([]relay.Endpoint, error)
	Endpoint(ctx context.Context, id int64) (relay.Endpoint, error)
	UpdateEndpoint(ctx context.Context, id int64, u relay.EndpointUpdate) (relay.Endpoint, error)
	DisableEndpoint(ctx context.Context, id int64, reason string) (relay.Endpoint, error)
	EnableEndpoint(ctx context.Context, id int64) (relay.Endpoint, int, error)
	EnableAndSendMissed(ctx context.Context, id int64) (relay.Endpoint, int, error)
	EndpointBacklog(ctx context.Context, id int64) (relay.Backlog, error)
	RotateSecret(ctx context.Context, id int64) (relay.Endpoint, string, error)
	RemoveEndpoint(ctx context.Context, id int64) error
	Deliveries(ctx context.Context, q relay.DeliveryQuery) ([]relay.Delivery, error)
	DeliveryWithAttempts(ctx context.Context, id int64) (relay.Delivery, []relay.Attempt, error)
	PlanReplay(ctx context.Context, q relay.ReplayQuery) (relay.ReplayPlan, error)
	StartReplay(ctx context.Context, q relay.ReplayQuery) (relay.Replay, relay.ReplayPlan, error)
	ReplayStatus(ctx context.Context, id int64) (relay.Replay, error)
	RetryDelivery(ctx context.Context, id int64) (relay.Replay, error)
	Alerts(ctx context.Context, endpointID int64) ([]relay.Alert, error)
}

var _ Admin = (*relay.Relay)(nil)

// Deps are the handlers' dependencies.
type Deps struct {
	Relay Admin
	// Logger receives unexpected errors; nil discards.
	Logger *slog.Logger
}

// maxBody bounds request bodies.
const maxBody = 64 << 10

// Mux is where Register mounts the handlers; *http.ServeMux and httpapi.Mux satisfy it.
type Mux interface {
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

// Register mounts the relay's routes on mux.
func Register(mux Mux, deps Deps) {
	h := &handlers{r: deps.Relay, log: deps.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	mux.HandleFunc("GET /api/admin/endpoints", h.listEndpoints)
	mux.HandleFunc("POST /api/admin/endpoints", h.addEndpoint)
	mux.HandleFunc("GET /api/admin/endpoints/{id}", h.getEndpoint)
	mux.HandleFunc("PATCH /api/admin/endpoints/{id}", h.updateEndpoint)
	mux.HandleFunc("DELETE /api/admin/endpoints/{id}", h.removeEndpoint)
	mux.HandleFunc("POST /api/admin/endpoints/{id}/disable", h.disableEndpoint)
	mux.HandleFunc("POST /api/admin/endpoints/{id}/enable", h.enableEndpoint)
	mux.HandleFunc("POST /api/admin/endpoints/{id}/rotate-secret", h.rotateSecret)
	mux.HandleFunc("POST /api/admin/endpoints/{id}/replay", h.replay)
	mux.HandleFunc("GET /api/admin/replays/{id}", h.replayStatus)
	mux.HandleFunc("GET /api/admin/deliveries", h.listDeliveries)
	mux.HandleFunc("GET /api/admin/deliveries/{id}", h.getDelivery)
	mux.HandleFunc("POST /api/admin/deliveries/{id}/retry", h.retryDelivery)
	mux.HandleFunc("GET /api/admin/alerts", h.listAlerts)
	mux.HandleFunc("GET /api/bookings/{booking}/deliveries", h.bookingDeliveries)
}

type handlers struct {
	r   Admin
	log *slog.Logger
}

// ErrorDTO is the body of every error answer: the read API's.
type ErrorDTO = readapi.ErrorDTO

var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{relay.ErrNotFound, http.StatusNotFound, "not_found"},
	{relay.ErrPrivateTarget, http.StatusUnprocessableEntity, "private_target"},
	{relay.ErrInvalidURL, http.StatusBadRequest, "invalid_url"},
	{relay.ErrInvalidTypes, http.StatusBadRequest, "invalid_types"},
	{relay.ErrInvalidFilter, http.StatusBadRequest, "invalid_filter"},
	{relay.ErrInvalidRate, http.StatusBadRequest, "invalid_rate"},
	{relay.ErrInvalid, http.StatusBadRequest, "invalid_request"},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "timeout"},
}

func (h *handlers) fail(w http.ResponseWriter, r *http.Request, err error) {
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			writeJSON(w, row.status, ErrorDTO{Error: err.Error(), Code: row.code})
			return
		}
	}
	if r.Context().Err() != nil {
		return
	}
	h.log.Error("relay api", "method", r.Method, "path", r.URL.Path, "error", err.Error())
	writeJSON(w, http.StatusInternalServerError, ErrorDTO{Error: "internal error", Code: "internal"})
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	writeJSON(w, http.StatusBadRequest, ErrorDTO{Error: fmt.Sprintf(format, args...), Code: "invalid_request"})
}

func writeJSON(w http.ResponseWriter, status int, v any) { readapi.WriteJSON(w, status, v) }

func idParam(w http.ResponseWriter, r *http.Request, what string) (int64, bool) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		if len(v) > 32 {
			v = v[:32] + "…"
		}
		badRequest(w, "%s id %q is not a positive integer", what, v)
		return 0, false
	}
	return id, true
}

// decode reads one JSON object of type T, refusing unknown fields; an empty body is the zero T.
func decode[T any](w http.ResponseWriter, r *http.Request, v *T) bool {
	return readapi.DecodeBody(w, r, maxBody, v, "one JSON object")
}

func (h *handlers) listEndpoints(w http.ResponseWriter, r *http.Request) {
	eps, err := h.r.Endpoints(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := EndpointsDTO{Endpoints: make([]EndpointDTO, len(eps))}
	for i, e := range eps {
		out.Endpoints[i] = ToEndpoint(e)
	}
	writeJSON(w, http.StatusOK, out)
}

// AddRequest is the body of POST /api/admin/endpoints.
type AddRequest struct {
	URL   string   `json:"url"`
	Types []string `json:"types,omitempty"`
	// Filter is in the filter syntax ("provider=calcom,status=active").
	Filter      string `json:"filter,omitempty"`
	Description string `json:"description,omitempty"`
	SettingsRequest
}

// SettingsRequest are the delivery settings of add and update; an absent field keeps its value (add:
// its default).
type SettingsRequest struct {
	Ordered         *bool    `json:"ordered,omitempty"`
	RatePerSecond   *float64 `json:"rate_per_second,omitempty"`
	Concurrency     *int     `json:"concurrency,omitempty"`
	BreakerFailures *int     `json:"breaker_failures,omitempty"`
	// DisableAfter is a Go duration ("120h"; "0s": never).
	DisableAfter *string `json:"disable_after,omitempty"`
}

func (s SettingsRequest) update() (relay.SettingsUpdate, error) {
	u := relay.SettingsUpdate{Ordered: s.Ordered, RatePerSecond: s.RatePerSecond, Concurrency: s.Concurrency, BreakerFailures: s.BreakerFailures}
	if s.DisableAfter != nil {
		d, err := time.ParseDuration(*s.DisableAfter)
		if err != nil {
			return u, fmt.Errorf("disable_after %q: want a Go duration such as \"120h\" (\"0s\": never)", *s.DisableAfter)
		}
		u.DisableAfter = &d
	}
	return u, nil
}

func (h *handlers) addEndpoint(w http.ResponseWriter, r *http.Request) {
	var req AddRequest
	if !decode(w, r, &req) {
		return
	}
	if req.URL == "" {
		badRequest(w, `body must be {"url": "https://…", "types": [...], "description": "…"}: url is required`)
		return
	}
	opts, err := req.update()
	if err != nil {
		badRequest(w, "%s", err)
		return
	}
	filter, err := relay.ParseFilter(req.Filter)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	e, secret, err := h.r.AddEndpoint(r.Context(), relay.NewEndpoint{URL: req.URL, Types: req.Types, Filter: filter, Description: req.Description, Options: opts})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, EndpointSecretDTO{Endpoint: ToEndpoint(e), Secret: secret})
}

func (h *handlers) getEndpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := idParam(w, r, "endpoint")
	if !ok {
		return
	}
	e, err := h.r.Endpoint(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ToEndpoint(e))
}

// UpdateRequest is the body of PATCH /api/admin/endpoints/{id}: the fields to change (types [] is
// every type).
type UpdateRequest struct {
	URL   *string   `json:"url,omitempty"`
	Types *[]string `json:"types,omitempty"`
	// Filter replaces the filter ("" : none).
	Filter      *string `json:"filter,omitempty"`
	Description *string `json:"description,omitempty"`
	SettingsRequest
}

func (h *handlers) updateEndpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := idParam(w, r, "endpoint")
	if !ok {
		return
	}
	var req UpdateRequest
	if !decode(w, r, &req) {
		return
	}
	opts, err := req.update()
	if err != nil {
		badRequest(w, "%s", err)
		return
	}
	change := relay.EndpointUpdate{URL: req.URL, Types: req.Types, Description: req.Description, Options: opts}
	if req.Filter != nil {
		f, err := relay.ParseFilter(*req.Filter)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		change.Filter = &f
	}
	e, err := h.r.UpdateEndpoint(r.Context(), id, change)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ToEndpoint(e))
}

func (h *handlers) removeEndpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := idParam(w, r, "endpoint")
	if !ok {
		return
	}
	if err := h.r.RemoveEndpoint(r.Context(), id); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handlers) disableEndpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := idParam(w, r, "endpoint")
	if !ok {
		return
	}
	e, err := h.r.DisableEndpoint(r.Context(), id, "disabled by an operator")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ToEndpoint(e))
}

func (h *handlers) enableEndpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := idParam(w, r, "endpoint")
	if !ok {
		return
	}
	enable := h.r.EnableEndpoint
	switch v := r.URL.Query().Get("send_missed"); v {
	case "", "false":
	case "true":
		enable = h.r.EnableAndSendMissed
	default:
		badRequest(w, "send_missed=%q: want true or false", v)
		return
	}
	e, n, err := enable(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, EnableDTO{Endpoint: ToEndpoint(e), Resumed: n})
}

func (h *handlers) rotateSecret(w http.ResponseWriter, r *http.Request) {
	id, ok := idParam(w, r, "endpoint")
	if !ok {
		return
	}
	e, secret, err := h.r.RotateSecret(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, EndpointSecretDTO{Endpoint: ToEndpoint(e), Secret: secret})
}

func (h *handlers) replay(w http.ResponseWriter, r *http.Request) {
	id, ok := idParam(w, r, "endpoint")
	if !ok {
		return
	}
	var req ReplayRequest
	if !decode(w, r, &req) {
		return
	}
	q := relay.ReplayQuery{EndpointID: id, From: req.From, To: req.To, Types: req.Types, OnlyFailed: req.OnlyFailed, Rate: req.Rate}
	if req.DryRun {
		p, err := h.r.PlanReplay(r.Context(), q)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, ToPlan(p))
		return
	}
	rep, p, err := h.r.StartReplay(r.Context(), q)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, ReplayStartedDTO{Replay: ToReplay(rep), Plan: ToPlan(p)})
}

func (h *handlers) replayStatus(w http.ResponseWriter, r *http.Request) {
	id, ok := idParam(w, r, "replay")
	if !ok {
		return
	}
	rep, err := h.r.ReplayStatus(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ToReplay(rep))
}

func (h *handlers) listDeliveries(w http.ResponseWriter, r *http.Request) {
	q := relay.DeliveryQuery{State: r.URL.Query().Get("state")}
	for name, dst := range map[string]*int64{"endpoint": &q.EndpointID} {
		if v := r.URL.Query().Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				badRequest(w, "%s must be a positive integer", name)
				return
			}
			*dst = n
		}
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 1000 {
			badRequest(w, "limit must be an integer from 1 to 1000")
			return
		}
		q.Limit = n
	}
	h.deliveries(w, r, q)
}

func (h *handlers) deliveries(w http.ResponseWriter, r *http.Request, q relay.DeliveryQuery) {
	ds, err := h.r.Deliveries(r.Context(), q)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ToDeliveries(ds))
}

func (h *handlers) getDelivery(w http.ResponseWriter, r *http.Request) {
	id, ok := idParam(w, r, "delivery")
	if !ok {
		return
	}
	d, as, err := h.r.DeliveryWithAttempts(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ToDelivery(d, as))
}

func (h *handlers) retryDelivery(w http.ResponseWriter, r *http.Request) {
	id, ok := idParam(w, r, "delivery")
	if !ok {
		return
	}
	rep, err := h.r.RetryDelivery(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, ToReplay(rep))
}

func (h *handlers) listAlerts(w http.ResponseWriter, r *http.Request) {
	var ep int64
	if v := r.URL.Query().Get("endpoint"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			badRequest(w, "endpoint must be a positive integer")
			return
		}
		ep = n
	}
	as, err := h.r.Alerts(r.Context(), ep)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ToAlerts(as))
}

func (h *handlers) bookingDeliveries(w http.ResponseWriter, r *http.Request) {
	id := booking.ID(r.PathValue("booking"))
	if err := id.Validate(); err != nil {
		badRequest(w, "booking: %v", err)
		return
	}
	h.deliveries(w, r, relay.DeliveryQuery{Booking: string(id), Limit: 1000})
}
