package readapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
)

// Reader is what the handlers need from the read model (readmodel.ReadModel implements it).
type Reader interface {
	Booking(ctx context.Context, id booking.ID) (calendar.Booking, error)
	History(ctx context.Context, id booking.ID) (history.History, error)
	Calendar(ctx context.Context, q calendar.CalendarQuery) (calendar.CalendarPage, error)
	OpenItems(ctx context.Context) ([]calendar.Item, error)
	Resolve(ctx context.Context, id int64, note, by string) (calendar.Item, error)
}

// StepResolver closes a process step's reconciliation item with an operator's action (mark-done,
// retry, skip) and applies it to the step (adapters/postgres/stepstore.Store); its errors wrap the projections
// sentinels as Reader.Resolve's do; by is recorded as the resolver, as Reader.Resolve records it.
type StepResolver interface {
	ResolveStep(ctx context.Context, id int64, action, note, by string) (calendar.Item, error)
}

// ReceiptReader lists and shows receipts for operators (readmodel.ReadModel implements it).
type ReceiptReader interface {
	Receipts(ctx context.Context, q history.ReceiptQuery) ([]history.ReceiptEntry, error)
	Receipt(ctx context.Context, id int64) (history.ReceiptDetail, error)
}

// Deps are the handlers' dependencies.
type Deps struct {
	Reader Reader
	// Steps, when set, lets POST /api/reconciliation/{id}/resolve take an "action" for step items.
	Steps StepResolver
	// Receipts serves GET /api/receipts and GET /api/receipts/{id}; nil answers them 404.
	Receipts ReceiptReader
	// People serves GET /api/bookings/{booking}/contact and GET /api/search; nil answers them 404.
	People PeopleReader
	// Actor names who made a request (auth.Actor: the token's name); a resolution records it. Without
	// it, or when it names nobody, resolving is refused.
	Actor func(*http.Request) string
	// Logger receives unexpected errors (never request bodies); nil discards.
	Logger *slog.Logger
}

// maxResolveBody bounds POST /api/reconciliation/{id}/resolve.
const maxResolveBody = 16 << 10

// maxResourceLength bounds the resource query parameter.
const maxResourceLength = 512

// Mux is where Register mounts the handlers: an auth.Routes on the server; *http.ServeMux and
// httpapi.Mux satisfy it too.
type Mux interface {
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

// Register mounts the read API on mux.
func Register(mux Mux, deps Deps) {
	h := &handlers{r: deps.Reader, steps: deps.Steps, log: deps.Logger, actor: deps.Actor}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.actor == nil {
		h.actor = func(*http.Request) string { return "" }
	}
	mux.HandleFunc("GET /api/bookings/{booking}", h.booking)
	mux.HandleFunc("GET /api/bookings/{booking}/history", h.history)
	mux.HandleFunc("GET /api/calendar", h.calendar)
	mux.HandleFunc("GET /api/reconciliation", h.reconciliation)
	mux.HandleFunc("POST /api/reconciliation/{id}/resolve", h.resolve)
	h.receipts = deps.Receipts
	mux.HandleFunc("GET /api/receipts", h.listReceipts)
	mux.HandleFunc("GET /api/receipts/{id}", h.showReceipt)
	h.people = deps.People
	mux.HandleFunc("GET /api/bookings/{booking}/contact", h.contact)
	mux.HandleFunc("GET /api/search", h.search)
}

// errNoReceipts answers the receipt routes of a read API built without a ReceiptReader.
var errNoReceipts = fmt.Errorf("receipts are not served here: %w", projections.ErrNotFound)

// receiptOutcomes are the outcomes GET /api/receipts?outcome= takes.
var receiptOutcomes = []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeDuplicate, ledger.OutcomeIgnored,
	ledger.OutcomeQuarantined, ledger.OutcomeRejected, ledger.OutcomeDeferred}

// ParseReceiptOutcome checks an outcome filter ("" for any); the CLI takes the same values.
func ParseReceiptOutcome(s string) (ledger.Outcome, error) {
	if s == "" || slices.Contains(receiptOutcomes, ledger.Outcome(s)) {
		return ledger.Outcome(s), nil
	}
	names := make([]string, len(receiptOutcomes))
	for i, o := range receiptOutcomes {
		names[i] = string(o)
	}
	return "", fmt.Errorf("%w: outcome %q is not one of %s", projections.ErrInvalidQuery, s, strings.Join(names, ", "))
}

func (h *handlers) listReceipts(w http.ResponseWriter, r *http.Request) {
	if h.receipts == nil {
		h.fail(w, r, errNoReceipts)
		return
	}
	q := r.URL.Query()
	outcome, err := ParseReceiptOutcome(q.Get("outcome"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rq := history.ReceiptQuery{Outcome: outcome, Provider: q.Get("provider")}
	if len(rq.Provider) > maxResourceLength || !ledger.Storable(rq.Provider) {
		badRequest(w, "provider must be UTF-8 without NUL, at most %d bytes", maxResourceLength)
		return
	}
	if v := q.Get("limit"); v != "" {
		if rq.Limit, err = strconv.Atoi(v); err != nil || rq.Limit < 1 {
			badRequest(w, "limit %q is not a positive integer", v)
			return
		}
	}
	rs, err := h.receipts.Receipts(r.Context(), rq)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := ReceiptsDTO{Receipts: make([]ReceiptDTO, len(rs))}
	for i, e := range rs {
		out.Receipts[i] = ToReceipt(e)
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handlers) showReceipt(w http.ResponseWriter, r *http.Request) {
	if h.receipts == nil {
		h.fail(w, r, errNoReceipts)
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		badRequest(w, "receipt id %q is not a positive integer", r.PathValue("id"))
		return
	}
	d, err := h.receipts.Receipt(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ToReceiptDetail(d))
}

type handlers struct {
	r        Reader
	steps    StepResolver
	receipts ReceiptReader
	people   PeopleReader
	log      *slog.Logger
	actor    func(*http.Request) string
}

// ErrorDTO is the body of every error answer.
type ErrorDTO struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// ErrorRow maps a sentinel error to an answer's status and code.
type ErrorRow struct {
	Err    error
	Status int
	Code   string
}

// errorTable maps the read side's sentinels to statuses; the first match wins.
var errorTable = []ErrorRow{
	{projections.ErrNotFound, http.StatusNotFound, "not_found"},
	{projections.ErrItemClosed, http.StatusConflict, "already_closed"},
	{projections.ErrInvalidQuery, http.StatusBadRequest, "invalid_request"},
	{booking.ErrInvalidEvent, http.StatusBadRequest, "invalid_booking_id"},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "timeout"},
}

func (h *handlers) fail(w http.ResponseWriter, r *http.Request, err error) {
	Fail(w, r, err, errorTable, h.log, "read api")
}

// Fail answers err with the first row of table it matches (its message in the error body), else
// logs it as api's and answers 500 internal without detail.
func Fail(w http.ResponseWriter, r *http.Request, err error, table []ErrorRow, log *slog.Logger, api string) {
	for _, row := range table {
		if errors.Is(err, row.Err) {
			writeJSON(w, row.Status, ErrorDTO{Error: err.Error(), Code: row.Code})
			return
		}
	}
	if r.Context().Err() != nil {
		return // the client went away; nobody reads an answer
	}
	log.Error(api, "method", r.Method, "path", r.URL.Path, "error", err.Error())
	writeJSON(w, http.StatusInternalServerError, ErrorDTO{Error: "internal error", Code: "internal"})
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	writeJSON(w, http.StatusBadRequest, ErrorDTO{Error: fmt.Sprintf(format, args...), Code: "invalid_request"})
}

func bookingParam(w http.ResponseWriter, r *http.Request) (booking.ID, bool) {
	id := booking.ID(r.PathValue("booking"))
	if err := id.Validate(); err != nil {
		// The code docs/api.md promises for it, not the generic invalid_request.
		writeJSON(w, http.StatusBadRequest, ErrorDTO{Error: fmt.Sprintf("booking: %v", err), Code: "invalid_booking_id"})
		return "", false
	}
	return id, true
}

func (h *handlers) booking(w http.ResponseWriter, r *http.Request) {
	id, ok := bookingParam(w, r)
	if !ok {
		return
	}
	b, err := h.r.Booking(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toBooking(b))
}

func (h *handlers) history(w http.ResponseWriter, r *http.Request) {
	id, ok := bookingParam(w, r)
	if !ok {
		return
	}
	hist, err := h.r.History(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ToHistory(hist))
}

func timeParam(w http.ResponseWriter, r *http.Request, name string) (time.Time, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		badRequest(w, "%s is required (an RFC 3339 time, e.g. 2027-03-15T00:00:00Z)", name)
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		badRequest(w, "%s %q is not an RFC 3339 time (e.g. 2027-03-15T00:00:00Z)", name, clip(v))
		return time.Time{}, false
	}
	return t, true
}

func (h *handlers) calendar(w http.ResponseWriter, r *http.Request) {
	from, ok := timeParam(w, r, "from")
	if !ok {
		return
	}
	to, ok := timeParam(w, r, "to")
	if !ok {
		return
	}
	resource := r.URL.Query().Get("resource")
	if len(resource) > maxResourceLength || !ledger.Storable(resource) {
		badRequest(w, "resource must be UTF-8 without NUL, at most %d bytes", maxResourceLength)
		return
	}
	q := calendar.CalendarQuery{From: from, To: to, Resource: resource}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > calendar.MaxCalendarPage {
			badRequest(w, "limit %q: want an integer from 1 to %d", clip(v), calendar.MaxCalendarPage)
			return
		}
		q.Limit = n
	}
	if v := r.URL.Query().Get("cursor"); v != "" {
		c, err := calendar.ParseCalendarCursor(v)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if !ledger.Storable(c.Resource) || c.Booking.Validate() != nil {
			// Decodes, but no calendar entry has such a resource or booking: not a cursor issued here.
			badRequest(w, "cursor is not one this server issued (pass next_cursor unchanged)")
			return
		}
		q.After = &c
	}
	if err := q.Validate(); err != nil {
		h.fail(w, r, err)
		return
	}
	page, err := h.r.Calendar(r.Context(), q)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ToCalendar(page))
}

func (h *handlers) reconciliation(w http.ResponseWriter, r *http.Request) {
	items, err := h.r.OpenItems(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := ItemsDTO{Items: make([]ItemDTO, len(items))}
	for i, it := range items {
		out.Items[i] = ToItem(it)
	}
	writeJSON(w, http.StatusOK, out)
}

// ResolveRequest is the body of POST /api/reconciliation/{id}/resolve.
type ResolveRequest struct {
	Note string `json:"note"`
	// Action resolves a process step's item: mark-done, retry or skip (required for step items,
	// refused for others).
	Action string `json:"action,omitempty"`
}

func (h *handlers) resolve(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		badRequest(w, "id %q is not a reconciliation item id", clip(r.PathValue("id")))
		return
	}
	var req ResolveRequest
	if !DecodeBody(w, r, maxResolveBody, &req, `{"note": "..."}`) {
		return
	}
	by := h.actor(r)
	if by == "" {
		writeJSON(w, http.StatusForbidden, ErrorDTO{Error: "no authenticated operator to record as the resolver", Code: "no_actor"})
		return
	}
	var it calendar.Item
	switch {
	case req.Action == "":
		it, err = h.r.Resolve(r.Context(), id, req.Note, by)
	case h.steps == nil:
		badRequest(w, "this server resolves no process steps: action %q not accepted", clip(req.Action))
		return
	default:
		it, err = h.steps.ResolveStep(r.Context(), id, req.Action, req.Note, by)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ToItem(it))
}

// DecodeBody reads a request body of at most limit bytes as one JSON object into v, refusing unknown
// fields and anything after the object; an empty body leaves v as it is. It answers a refusal itself —
// 413 body_too_large, or 400 invalid_request saying the body should look like want — and reports
// whether v is to be used.
func DecodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any, want string) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeJSON(w, http.StatusRequestEntityTooLarge, ErrorDTO{Error: fmt.Sprintf("body larger than %d bytes", limit), Code: "body_too_large"})
			return false
		}
		badRequest(w, "body could not be read")
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		badRequest(w, "body must be %s: %v", want, err)
		return false
	}
	if dec.More() {
		badRequest(w, "body must be one JSON object %s", want)
		return false
	}
	return true
}

// WriteJSON writes v as the answer with the API's headers; the relay's admin routes answer through it
// too, so every /api/ route has one body format.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only this package's DTOs reach here; a failure is a programming error.
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error","code":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func clip(s string) string { return ledger.StorableText(s, 64) }
