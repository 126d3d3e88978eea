package ui

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"bookingledger/adapters/httpapi/auth"
)

// refusalPages are the templates Refusal renders with (the server's are the same files).
var refusalPages = sync.OnceValues(parsePages)

// WantsPage says whether a refusal of r should be a page rather than the JSON error body: a browser
// navigating the UI or the jobs UI with its session cookie (no Authorization header, HTML accepted).
// API clients and the jobs UI's own fetches keep the JSON body.
func WantsPage(r *http.Request) bool {
	p := r.URL.Path
	return r.Header.Get("Authorization") == "" && (strings.HasPrefix(p, "/ui/") || strings.HasPrefix(p, "/admin/")) &&
		strings.Contains(r.Header.Get("Accept"), "text/html")
}

// Refusal writes the auth layer's refusal of a browser's request (a read token at an admin page, a
// form from another origin, too many failures) as the UI's error page instead of raw JSON: status,
// the same message, and what the operator can do about it (code is the JSON error code).
func Refusal(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	pages, err := refusalPages()
	if err != nil {
		http.Error(w, msg, status)
		return
	}
	title := http.StatusText(status)
	if code == "insufficient_scope" {
		title = "Admins only"
	}
	loc := zoneOf(r)
	p := page{Title: title, Nav: "error", Data: errorData{Message: msg, Code: code}, Zone: loc.String(), Zones: zoneChoices(loc.String()), Here: here(r)}
	if t, ok := auth.FromContext(r.Context()); ok { // signed in, with too small a scope
		p.Who, p.Admin = t.Name, t.Scope.Allows(auth.ScopeAdmin)
	}
	writePage(w, slog.New(slog.DiscardHandler), pages["error"], "error", status, p, loc)
}
