package resourceapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/domain/resource"
)

// Links is what the handlers need (*resource.Service implements it).
type Links interface {
	Load(ctx context.Context) (resource.State, []resource.Event, error)
	Link(ctx context.Context, name string, ids []string, by string, at time.Time) ([]resource.Event, error)
	Unlink(ctx context.Context, name string, ids []string, by string, at time.Time) ([]resource.Event, error)
}

var _ Links = (*resource.Service)(nil)

// Deps are the handlers' dependencies.
type Deps struct {
	Links Links
	// Actor names who made a request (auth.Actor).
	Actor func(*http.Request) string
	// Now is the clock of the recorded changes (time.Now when nil).
	Now    func() time.Time
	Logger *slog.Logger
}

// Mux is where Register mounts the handlers (an auth.Routes on the server).
type Mux interface {
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

// Register mounts the routes of linked resources on mux.
func Register(mux Mux, d Deps) {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handlers{d: d}
	mux.HandleFunc("GET /api/admin/resources", h.list)
	mux.HandleFunc("GET /api/admin/resources/{name}", h.show)
	mux.HandleFunc("POST /api/admin/resources/{name}/link", h.change(d.Links.Link))
	mux.HandleFunc("POST /api/admin/resources/{name}/unlink", h.change(d.Links.Unlink))
}

type handlers struct{ d Deps }

// ResourceDTO is one linked resource.
type ResourceDTO struct {
	Name              string   `json:"name"`
	ProviderResources []string `json:"provider_resources"`
}

// ListDTO answers GET /api/admin/resources and `resources list --json`.
type ListDTO struct {
	Resources []ResourceDTO `json:"resources"`
	// Version is the link stream's version the answer was read at.
	Version uint64 `json:"version"`
}

// EventDTO is one recorded link or unlink.
type EventDTO struct {
	EventID           string    `json:"event_id"`
	Type              string    `json:"type"`
	Name              string    `json:"name"`
	ProviderResources []string  `json:"provider_resources"`
	By                string    `json:"by"`
	At                time.Time `json:"at"`
}

// ShowDTO answers GET /api/admin/resources/{name} and `resources show --json`: the name's current
// provider resources and every change that named it, oldest first.
type ShowDTO struct {
	ResourceDTO
	History []EventDTO `json:"history"`
}

// ChangeDTO answers a link or unlink: the resource after it, and the events appended (none when the
// stream said so already).
type ChangeDTO struct {
	ResourceDTO
	Appended []EventDTO `json:"appended"`
}

type changeRequest struct {
	ProviderResources []string `json:"provider_resources"`
}

// List is the list document of a state.
func List(st resource.State) ListDTO {
	out := ListDTO{Resources: []ResourceDTO{}, Version: st.Version}
	for _, n := range st.Names() {
		out.Resources = append(out.Resources, resourceOf(st, n))
	}
	return out
}

// Show is the show document of name, or resource.ErrNotFound when no event ever named it.
func Show(st resource.State, events []resource.Event, name string) (ShowDTO, error) {
	out := ShowDTO{ResourceDTO: resourceOf(st, name), History: []EventDTO{}}
	for _, e := range events {
		if e.Name == name {
			out.History = append(out.History, Event(e))
		}
	}
	if len(out.History) == 0 {
		return ShowDTO{}, fmt.Errorf("%w: %s (see the list of linked resources)", resource.ErrNotFound, name)
	}
	return out, nil
}

// Event is the document of one link event.
func Event(e resource.Event) EventDTO {
	return EventDTO{EventID: e.ID.String(), Type: string(e.Type), Name: e.Name, ProviderResources: orEmpty(e.Resources), By: e.By, At: e.At.UTC()}
}

func resourceOf(st resource.State, name string) ResourceDTO {
	return ResourceDTO{Name: name, ProviderResources: orEmpty(st.Resources(name))}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (h *handlers) list(w http.ResponseWriter, r *http.Request) {
	st, _, err := h.d.Links.Load(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	readapi.WriteJSON(w, http.StatusOK, List(st))
}

func (h *handlers) show(w http.ResponseWriter, r *http.Request) {
	st, evs, err := h.d.Links.Load(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	doc, err := Show(st, evs, r.PathValue("name"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	readapi.WriteJSON(w, http.StatusOK, doc)
}

// maxBody bounds a change request.
const maxBody = 64 << 10

func (h *handlers) change(do func(context.Context, string, []string, string, time.Time) ([]resource.Event, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req changeRequest
		if !readapi.DecodeBody(w, r, maxBody, &req, `{"provider_resources": ["…"]}`) {
			return
		}
		name := r.PathValue("name")
		evs, err := do(r.Context(), name, req.ProviderResources, h.d.Actor(r), h.d.Now().UTC())
		if err != nil {
			h.fail(w, r, err)
			return
		}
		st, _, err := h.d.Links.Load(r.Context())
		if err != nil {
			h.fail(w, r, err)
			return
		}
		out := ChangeDTO{ResourceDTO: resourceOf(st, name), Appended: []EventDTO{}}
		for _, e := range evs {
			out.Appended = append(out.Appended, Event(e))
		}
		readapi.WriteJSON(w, http.StatusOK, out)
	}
}

var errorTable = []readapi.ErrorRow{
	{Err: resource.ErrNotFound, Status: http.StatusNotFound, Code: "not_found"},
	{Err: resource.ErrLinkedElsewhere, Status: http.StatusConflict, Code: "linked_elsewhere"},
	{Err: resource.ErrInvalid, Status: http.StatusBadRequest, Code: "invalid_request"},
	{Err: context.DeadlineExceeded, Status: http.StatusServiceUnavailable, Code: "timeout"},
}

func (h *handlers) fail(w http.ResponseWriter, r *http.Request, err error) {
	readapi.Fail(w, r, err, errorTable, h.d.Logger, "resource api")
}
