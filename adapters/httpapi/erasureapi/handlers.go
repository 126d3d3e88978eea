package erasureapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/privacy"
	"bookingledger/domain/booking"
)

// Eraser is what the handlers need (*privacy.Eraser implements it).
type Eraser interface {
	Erase(ctx context.Context, req privacy.Request) (privacy.Erasure, error)
	Erasures(ctx context.Context, limit int) ([]privacy.Erasure, error)
}

var _ Eraser = (*privacy.Eraser)(nil)

// Deps are the handlers' dependencies.
type Deps struct {
	Eraser Eraser
	// Actor names who made a request (the token's name), recorded as who asked.
	Actor func(*http.Request) string
	// Logger receives unexpected errors; nil discards.
	Logger *slog.Logger
}

// Mux is where Register mounts the handlers.
type Mux interface {
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

// Register mounts the erasure routes on mux.
func Register(mux Mux, deps Deps) {
	h := &handlers{d: deps}
	if h.d.Logger == nil {
		h.d.Logger = slog.New(slog.DiscardHandler)
	}
	mux.HandleFunc("POST /api/admin/erasures", h.erase)
	mux.HandleFunc("GET /api/admin/erasures", h.list)
}

type handlers struct{ d Deps }

// RequestDTO is POST /api/admin/erasures's body: exactly one of booking and email.
type RequestDTO struct {
	Booking string `json:"booking,omitempty"`
	Email   string `json:"email,omitempty"`
	DryRun  bool   `json:"dry_run,omitempty"`
}

// ListDTO is GET /api/admin/erasures's body, newest first.
type ListDTO struct {
	Erasures []privacy.Erasure `json:"erasures"`
}

const maxBody = 8 << 10

func (h *handlers) erase(w http.ResponseWriter, r *http.Request) {
	var req RequestDTO
	if !readapi.DecodeBody(w, r, maxBody, &req, `{"booking": …} or {"email": …} with optional "dry_run"`) {
		return
	}
	er, err := h.d.Eraser.Erase(r.Context(), privacy.Request{Booking: booking.ID(req.Booking), Email: req.Email, By: "token " + h.d.Actor(r), DryRun: req.DryRun})
	switch {
	case errors.Is(err, privacy.ErrInvalidErasure):
		bad(w, err.Error())
		return
	case errors.Is(err, privacy.ErrNothingToErase):
		readapi.WriteJSON(w, http.StatusNotFound, readapi.ErrorDTO{Error: "no booking has a contact with that address (never known, or erased already)", Code: "not_found"})
		return
	case err != nil:
		h.internal(w, r, err)
		return
	}
	status := http.StatusOK
	if er.ID != 0 {
		status = http.StatusCreated
	}
	readapi.WriteJSON(w, status, er)
}

func (h *handlers) list(w http.ResponseWriter, r *http.Request) {
	ers, err := h.d.Eraser.Erasures(r.Context(), 1000)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if ers == nil {
		ers = []privacy.Erasure{}
	}
	readapi.WriteJSON(w, http.StatusOK, ListDTO{Erasures: ers})
}

func bad(w http.ResponseWriter, msg string) {
	readapi.WriteJSON(w, http.StatusBadRequest, readapi.ErrorDTO{Error: msg, Code: "invalid_request"})
}

func (h *handlers) internal(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	h.d.Logger.Error("erasure api", "method", r.Method, "path", r.URL.Path, "error", err.Error())
	readapi.WriteJSON(w, http.StatusInternalServerError, readapi.ErrorDTO{Error: "internal error", Code: "internal"})
}
