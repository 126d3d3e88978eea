package ui

import (
	"net/http"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // the selector's zones without the host's zoneinfo (distroless images have none)
)

// ZoneCookie keeps the operator's time zone between pages (a preference, not a credential).
const ZoneCookie = "bookingledger_tz"

// zones are the selector's choices; the browser's own zone is added by static/tz.js, and a zone
// chosen otherwise (a link's ?tz=) is listed too.
var zones = []string{"UTC",
	"Europe/London", "Europe/Dublin", "Europe/Lisbon", "Europe/Paris", "Europe/Berlin", "Europe/Amsterdam", "Europe/Madrid",
	"Europe/Rome", "Europe/Zurich", "Europe/Vienna", "Europe/Stockholm", "Europe/Warsaw", "Europe/Athens", "Europe/Helsinki",
	"Europe/Istanbul", "America/New_York", "America/Toronto", "America/Chicago", "America/Denver", "America/Phoenix",
	"America/Los_Angeles", "America/Mexico_City", "America/Sao_Paulo", "Africa/Johannesburg", "Asia/Dubai", "Asia/Kolkata",
	"Asia/Singapore", "Asia/Shanghai", "Asia/Tokyo", "Australia/Sydney", "Pacific/Auckland"}

// loadZone reads an IANA zone name; "" and anything that is not one are false.
func loadZone(name string) (*time.Location, bool) {
	if name == "" || len(name) > 64 || strings.Contains(name, "..") || strings.HasPrefix(name, "/") || name == "Local" {
		return nil, false
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, false
	}
	return loc, true
}

// zoneOf is the request's time zone: ?tz= (a link to a page in a zone), else the cookie, else UTC.
func zoneOf(r *http.Request) *time.Location {
	if loc, ok := loadZone(r.URL.Query().Get("tz")); ok {
		return loc
	}
	if c, err := r.Cookie(ZoneCookie); err == nil {
		if loc, ok := loadZone(c.Value); ok {
			return loc
		}
	}
	return time.UTC
}

// zoneChoices are the selector's options with the current zone among them.
func zoneChoices(current string) []string {
	if slices.Contains(zones, current) {
		return zones
	}
	return append([]string{current}, zones...)
}

// setZone keeps the chosen zone in a cookie and goes back to the page it was chosen on. It is a GET
// (read tokens choose a zone too, and every POST needs admin); it changes only the browser's cookie.
func (s *server) setZone(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("tz")
	if _, ok := loadZone(name); !ok {
		s.fail(w, r, errBadRequestf("unknown time zone; pick one of the list, such as Europe/Berlin"))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: ZoneCookie, Value: name, Path: "/ui/", MaxAge: 365 * 24 * 3600,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	next := safeNext(r.URL.Query().Get("next"))
	http.Redirect(w, r, withoutTZ(next), http.StatusSeeOther)
}

// withoutTZ drops a ?tz= from a page's address, so that the cookie decides there.
func withoutTZ(next string) string {
	path, query, ok := strings.Cut(next, "?")
	if !ok {
		return next
	}
	var kept []string
	for _, kv := range strings.Split(query, "&") {
		if !strings.HasPrefix(kv, "tz=") && kv != "" {
			kept = append(kept, kv)
		}
	}
	if len(kept) == 0 {
		return path
	}
	return path + "?" + strings.Join(kept, "&")
}

// The one date format of the pages: "Fri 4 Dec 2026", times "10:00" and, where seconds matter,
// "Fri 4 Dec 2026 10:00:05"; always in the page's zone, whose name the header shows.
const (
	dayFormat   = "Mon 2 Jan 2006"
	stampFormat = "Mon 2 Jan 2006 15:04:05"
)

// zoneFuncs format times in loc.
func zoneFuncs(loc *time.Location) map[string]any {
	return map[string]any{
		"stamp": func(t time.Time) string {
			if t.IsZero() {
				return "–"
			}
			return t.In(loc).Format(stampFormat)
		},
		"hm":  func(t time.Time) string { return t.In(loc).Format("15:04") },
		"day": func(t time.Time) string { return t.In(loc).Format(dayFormat) },
		"slot": func(start, end time.Time) string {
			if start.IsZero() {
				return "–"
			}
			s, e := start.In(loc), end.In(loc)
			if e.Format(time.DateOnly) == s.Format(time.DateOnly) {
				return s.Format(dayFormat+", 15:04") + "–" + e.Format("15:04")
			}
			return s.Format(dayFormat+", 15:04") + " – " + e.Format(dayFormat+", 15:04")
		},
		"isoDate": func(t time.Time) string { return t.In(loc).Format(time.DateOnly) },
	}
}
