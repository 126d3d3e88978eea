package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/calroute"
	"bookingledger/adapters/gcal"
	"bookingledger/adapters/msgraph"
	"bookingledger/adapters/process"
	"bookingledger/adapters/render"
)

// Environment variables of the calendar targets by host resource (docs/process-steps.md,
// "Calendar targets"). Secrets come from files or the environment and are never logged.
const (
	envCalendarsFile             = "BOOKINGLEDGER_CALENDARS_FILE"
	envGoogleCredentialsFile     = "BOOKINGLEDGER_GOOGLE_CREDENTIALS_FILE"
	envGoogleCredentials         = "BOOKINGLEDGER_GOOGLE_CREDENTIALS"
	envGoogleEndpoint            = "BOOKINGLEDGER_GOOGLE_ENDPOINT"
	envMicrosoftTenantID         = "BOOKINGLEDGER_MICROSOFT_TENANT_ID"
	envMicrosoftClientID         = "BOOKINGLEDGER_MICROSOFT_CLIENT_ID"
	envMicrosoftClientSecret     = "BOOKINGLEDGER_MICROSOFT_CLIENT_SECRET"
	envMicrosoftClientSecretFile = "BOOKINGLEDGER_MICROSOFT_CLIENT_SECRET_FILE"
	envMicrosoftEndpoint         = "BOOKINGLEDGER_MICROSOFT_ENDPOINT"
	envMicrosoftTokenURL         = "BOOKINGLEDGER_MICROSOFT_TOKEN_URL"
)

// Calendar target names, as the calendars file writes them.
const (
	targetCalDAV    = "caldav"
	targetGoogle    = "google"
	targetMicrosoft = "microsoft"
	targetNone      = "none"
)

// calendarEntry is one resource's calendar in the calendars file.
type calendarEntry struct {
	Target string `json:"target"`
	// Calendar: Google's calendar id ("primary" or an address); Microsoft's calendar id (empty: the
	// mailbox's default calendar). Unused for CalDAV (the URL template names the collection).
	Calendar string `json:"calendar,omitempty"`
	// As: the Workspace user a Google service account acts as (domain-wide delegation).
	As string `json:"as,omitempty"`
	// User: the Microsoft 365 mailbox (user id or userPrincipalName).
	User string `json:"user,omitempty"`
	// TimeZone: the resource's IANA time zone (docs/templates.md): its calendar events' texts are in
	// it, and its invitees' emails when the provider sent no zone of the invitee's.
	TimeZone string `json:"timezone,omitempty"`
}

// calendarsFile is the JSON document of BOOKINGLEDGER_CALENDARS_FILE.
type calendarsFile struct {
	// Default is the target of resources the file does not list: caldav (the default when CalDAV is
	// configured) or none.
	Default string `json:"default,omitempty"`
	// TimeZone is the time zone of resources whose entry names none, or that the file does not list.
	TimeZone  string                   `json:"timezone,omitempty"`
	Resources map[string]calendarEntry `json:"resources"`
}

// calendarRoutes is the calendars file, ready to route: an entry by the resource itself, else by the
// canonical name it is linked to (read from the calendar's links once a pool is known), else the default.
type calendarRoutes struct {
	file      calendarsFile
	canonical atomic.Pointer[func(string) string]
}

func (r *calendarRoutes) entry(resource string) (calendarEntry, bool) {
	if e, ok := r.file.Resources[resource]; ok {
		return e, true
	}
	if f := r.canonical.Load(); f != nil {
		if name := (*f)(resource); name != "" {
			if e, ok := r.file.Resources[name]; ok {
				return e, true
			}
		}
	}
	if r.file.Default == targetCalDAV {
		return calendarEntry{Target: targetCalDAV}, true
	}
	return calendarEntry{}, false
}

// zone is the resource's time zone: its entry's, else the file's, else "".
func (r *calendarRoutes) zone(resource string) string {
	if e, ok := r.entry(resource); ok && e.TimeZone != "" {
		return e.TimeZone
	}
	return r.file.TimeZone
}

func (r *calendarRoutes) choose(resource string) string {
	e, ok := r.entry(resource)
	if !ok || e.Target == targetNone {
		return ""
	}
	return e.Target
}

// readCalendarsFile reads and checks the file: known targets, each with what it needs.
func readCalendarsFile(path string, caldavSet bool) (calendarsFile, error) {
	var f calendarsFile
	data, err := os.ReadFile(path)
	if err != nil {
		return f, usageErrorf("%s: %w", envCalendarsFile, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, usageErrorf("%s %s: %w", envCalendarsFile, path, err)
	}
	switch f.Default {
	case "":
		f.Default = targetNone
		if caldavSet {
			f.Default = targetCalDAV
		}
	case targetCalDAV, targetNone:
	default:
		return f, usageErrorf("%s: default %q: want caldav or none", envCalendarsFile, f.Default)
	}
	if f.Default == targetCalDAV && !caldavSet {
		return f, usageErrorf("%s: default caldav needs %s", envCalendarsFile, envCalDAVURLTemplate)
	}
	if f.TimeZone != "" {
		if _, err := render.LoadZone(f.TimeZone); err != nil {
			return f, usageErrorf("%s: timezone: %w (e.g. Europe/Berlin)", envCalendarsFile, err)
		}
	}
	names := make([]string, 0, len(f.Resources))
	for n := range f.Resources {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e := f.Resources[n]
		if e.TimeZone != "" {
			if _, err := render.LoadZone(e.TimeZone); err != nil {
				return f, usageErrorf("%s: %s: timezone: %w (e.g. Europe/Berlin)", envCalendarsFile, n, err)
			}
		}
		switch e.Target {
		case targetCalDAV:
			if !caldavSet {
				return f, usageErrorf("%s: %s: target caldav needs %s", envCalendarsFile, n, envCalDAVURLTemplate)
			}
		case targetGoogle:
			if e.Calendar == "" {
				return f, usageErrorf("%s: %s: target google needs \"calendar\" (\"primary\" or the calendar's id)", envCalendarsFile, n)
			}
		case targetMicrosoft:
			if e.User == "" {
				return f, usageErrorf("%s: %s: target microsoft needs \"user\" (the mailbox)", envCalendarsFile, n)
			}
		case targetNone:
		default:
			return f, usageErrorf("%s: %s: target %q: want caldav, google, microsoft or none", envCalendarsFile, n, e.Target)
		}
	}
	return f, nil
}

func (f calendarsFile) uses(target string) bool {
	for _, e := range f.Resources {
		if e.Target == target {
			return true
		}
	}
	return false
}

// parseCalendars reads the calendars file and builds the Google and Microsoft targets it uses. It
// returns nil routes when no file is set (CalDAV alone, as configured by its variables).
func parseCalendars(getenv func(string) string, caldavSet, allow bool, timeout time.Duration) (*calendarRoutes, *gcal.Target, *msgraph.Target, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	path := env(envCalendarsFile)
	if path == "" {
		return nil, nil, nil, nil
	}
	f, err := readCalendarsFile(path, caldavSet)
	if err != nil {
		return nil, nil, nil, err
	}
	routes := &calendarRoutes{file: f}
	var g *gcal.Target
	if f.uses(targetGoogle) {
		cfg := gcal.Config{Endpoint: env(envGoogleEndpoint), AllowPrivate: allow, Timeout: timeout,
			Calendars: func(resource string) (gcal.Calendar, bool) {
				e, ok := routes.entry(resource)
				return gcal.Calendar{ID: e.Calendar, As: e.As}, ok && e.Target == targetGoogle
			}}
		switch p := env(envGoogleCredentialsFile); {
		case p != "" && getenv(envGoogleCredentials) != "":
			return nil, nil, nil, usageErrorf("set %s or %s, not both", envGoogleCredentialsFile, envGoogleCredentials)
		case getenv(envGoogleCredentials) != "":
			cfg.Credentials = []byte(getenv(envGoogleCredentials))
		case p != "":
			if cfg.Credentials, err = os.ReadFile(p); err != nil {
				return nil, nil, nil, usageErrorf("%s: %w", envGoogleCredentialsFile, err)
			}
		case cfg.Endpoint == "":
			return nil, nil, nil, usageErrorf("%s: target google needs %s (a service account key or an authorized user's refresh token)", envCalendarsFile, envGoogleCredentialsFile)
		}
		if g, err = gcal.New(cfg); err != nil {
			return nil, nil, nil, usageErrorf("%s: %w", envGoogleCredentialsFile, err)
		}
	}
	var m *msgraph.Target
	if f.uses(targetMicrosoft) {
		cfg := msgraph.Config{Endpoint: env(envMicrosoftEndpoint), TokenURL: env(envMicrosoftTokenURL), AllowPrivate: allow, Timeout: timeout,
			TenantID: env(envMicrosoftTenantID), ClientID: env(envMicrosoftClientID), ClientSecret: getenv(envMicrosoftClientSecret),
			Mailboxes: func(resource string) (msgraph.Mailbox, bool) {
				e, ok := routes.entry(resource)
				return msgraph.Mailbox{User: e.User, Calendar: e.Calendar}, ok && e.Target == targetMicrosoft
			}}
		if p := env(envMicrosoftClientSecretFile); p != "" {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, nil, nil, usageErrorf("%s: %w", envMicrosoftClientSecretFile, err)
			}
			cfg.ClientSecret = strings.TrimSpace(string(b))
		}
		if cfg.ClientID == "" && cfg.Endpoint == "" {
			return nil, nil, nil, usageErrorf("%s: target microsoft needs %s, %s and %s (or %s)", envCalendarsFile,
				envMicrosoftTenantID, envMicrosoftClientID, envMicrosoftClientSecret, envMicrosoftClientSecretFile)
		}
		if m, err = msgraph.New(cfg); err != nil {
			return nil, nil, nil, usageErrorf("%s: %w", envMicrosoftClientID, err)
		}
	}
	return routes, g, m, nil
}

// calendarTarget is the calendar of the step worker: CalDAV alone without a calendars file, else a
// router over the configured targets whose resources are looked up (linked names) in pool.
func (c stepsConfig) calendarTarget(pool *pgxpool.Pool) process.Calendar {
	if c.routes == nil {
		if c.calendar == nil {
			return nil
		}
		return c.calendar
	}
	if pool != nil {
		canonical := func(resource string) string {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var name string
			_ = pool.QueryRow(ctx, `SELECT name FROM calendar_resource_links WHERE resource = $1`, resource).Scan(&name)
			return name
		}
		c.routes.canonical.Store(&canonical)
	}
	r := &calroute.Router{Targets: map[string]calroute.Target{}, Choose: c.routes.choose}
	if c.calendar != nil {
		r.Targets[targetCalDAV] = calroute.Target{Name: targetCalDAV, Calendar: c.calendar}
	}
	if c.google != nil {
		r.Targets[targetGoogle] = calroute.Target{Name: targetGoogle, Prefix: c.google.Endpoint(), Calendar: c.google}
	}
	if c.microsoft != nil {
		r.Targets[targetMicrosoft] = calroute.Target{Name: targetMicrosoft, Prefix: c.microsoft.Endpoint(), Calendar: c.microsoft}
	}
	return r
}

// hasCalendar reports whether calendar steps are planned: some target is configured.
func (c stepsConfig) hasCalendar() bool {
	return c.calendar != nil || c.google != nil || c.microsoft != nil
}
