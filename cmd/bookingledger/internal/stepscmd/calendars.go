package stepscmd

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
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/process"
	"bookingledger/adapters/render"
	"bookingledger/cmd/bookingledger/internal/cmdline"
)

// Environment variables of the calendar targets by host resource (docs/process-steps.md,
// "Calendar targets"). Secrets come from files or the environment and are never logged.
const (
	EnvCalendarsFile             = "BOOKINGLEDGER_CALENDARS_FILE"
	EnvGoogleCredentialsFile     = "BOOKINGLEDGER_GOOGLE_CREDENTIALS_FILE"
	EnvGoogleCredentials         = "BOOKINGLEDGER_GOOGLE_CREDENTIALS"
	EnvGoogleEndpoint            = "BOOKINGLEDGER_GOOGLE_ENDPOINT"
	EnvMicrosoftTenantID         = "BOOKINGLEDGER_MICROSOFT_TENANT_ID"
	EnvMicrosoftClientID         = "BOOKINGLEDGER_MICROSOFT_CLIENT_ID"
	EnvMicrosoftClientSecret     = "BOOKINGLEDGER_MICROSOFT_CLIENT_SECRET"
	EnvMicrosoftClientSecretFile = "BOOKINGLEDGER_MICROSOFT_CLIENT_SECRET_FILE"
	EnvMicrosoftEndpoint         = "BOOKINGLEDGER_MICROSOFT_ENDPOINT"
	EnvMicrosoftTokenURL         = "BOOKINGLEDGER_MICROSOFT_TOKEN_URL"
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
		return f, cmdline.UsageErrorf("%s: %w", EnvCalendarsFile, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, cmdline.UsageErrorf("%s %s: %w", EnvCalendarsFile, path, err)
	}
	switch f.Default {
	case "":
		f.Default = targetNone
		if caldavSet {
			f.Default = targetCalDAV
		}
	case targetCalDAV, targetNone:
	default:
		return f, cmdline.UsageErrorf("%s: default %q: want caldav or none", EnvCalendarsFile, f.Default)
	}
	if f.Default == targetCalDAV && !caldavSet {
		return f, cmdline.UsageErrorf("%s: default caldav needs %s", EnvCalendarsFile, EnvCalDAVURLTemplate)
	}
	if f.TimeZone != "" {
		if _, err := render.LoadZone(f.TimeZone); err != nil {
			return f, cmdline.UsageErrorf("%s: timezone: %w (e.g. Europe/Berlin)", EnvCalendarsFile, err)
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
				return f, cmdline.UsageErrorf("%s: %s: timezone: %w (e.g. Europe/Berlin)", EnvCalendarsFile, n, err)
			}
		}
		switch e.Target {
		case targetCalDAV:
			if !caldavSet {
				return f, cmdline.UsageErrorf("%s: %s: target caldav needs %s", EnvCalendarsFile, n, EnvCalDAVURLTemplate)
			}
		case targetGoogle:
			if e.Calendar == "" {
				return f, cmdline.UsageErrorf("%s: %s: target google needs \"calendar\" (\"primary\" or the calendar's id)", EnvCalendarsFile, n)
			}
		case targetMicrosoft:
			if e.User == "" {
				return f, cmdline.UsageErrorf("%s: %s: target microsoft needs \"user\" (the mailbox)", EnvCalendarsFile, n)
			}
		case targetNone:
		default:
			return f, cmdline.UsageErrorf("%s: %s: target %q: want caldav, google, microsoft or none", EnvCalendarsFile, n, e.Target)
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
	path := env(EnvCalendarsFile)
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
		cfg := gcal.Config{Endpoint: env(EnvGoogleEndpoint), AllowPrivate: allow, Timeout: timeout,
			Calendars: func(resource string) (gcal.Calendar, bool) {
				e, ok := routes.entry(resource)
				return gcal.Calendar{ID: e.Calendar, As: e.As}, ok && e.Target == targetGoogle
			}}
		switch p := env(EnvGoogleCredentialsFile); {
		case p != "" && getenv(EnvGoogleCredentials) != "":
			return nil, nil, nil, cmdline.UsageErrorf("set %s or %s, not both", EnvGoogleCredentialsFile, EnvGoogleCredentials)
		case getenv(EnvGoogleCredentials) != "":
			cfg.Credentials = []byte(getenv(EnvGoogleCredentials))
		case p != "":
			if cfg.Credentials, err = os.ReadFile(p); err != nil {
				return nil, nil, nil, cmdline.UsageErrorf("%s: %w", EnvGoogleCredentialsFile, err)
			}
		case cfg.Endpoint == "":
			return nil, nil, nil, cmdline.UsageErrorf("%s: target google needs %s (a service account key or an authorized user's refresh token)", EnvCalendarsFile, EnvGoogleCredentialsFile)
		}
		if g, err = gcal.New(cfg); err != nil {
			return nil, nil, nil, cmdline.UsageErrorf("%s: %w", EnvGoogleCredentialsFile, err)
		}
	}
	var m *msgraph.Target
	if f.uses(targetMicrosoft) {
		cfg := msgraph.Config{Endpoint: env(EnvMicrosoftEndpoint), TokenURL: env(EnvMicrosoftTokenURL), AllowPrivate: allow, Timeout: timeout,
			TenantID: env(EnvMicrosoftTenantID), ClientID: env(EnvMicrosoftClientID), ClientSecret: getenv(EnvMicrosoftClientSecret),
			Mailboxes: func(resource string) (msgraph.Mailbox, bool) {
				e, ok := routes.entry(resource)
				return msgraph.Mailbox{User: e.User, Calendar: e.Calendar}, ok && e.Target == targetMicrosoft
			}}
		if p := env(EnvMicrosoftClientSecretFile); p != "" {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, nil, nil, cmdline.UsageErrorf("%s: %w", EnvMicrosoftClientSecretFile, err)
			}
			cfg.ClientSecret = strings.TrimSpace(string(b))
		}
		if cfg.ClientID == "" && cfg.Endpoint == "" {
			return nil, nil, nil, cmdline.UsageErrorf("%s: target microsoft needs %s, %s and %s (or %s)", EnvCalendarsFile,
				EnvMicrosoftTenantID, EnvMicrosoftClientID, EnvMicrosoftClientSecret, EnvMicrosoftClientSecretFile)
		}
		if m, err = msgraph.New(cfg); err != nil {
			return nil, nil, nil, cmdline.UsageErrorf("%s: %w", EnvMicrosoftClientID, err)
		}
	}
	return routes, g, m, nil
}

// calendarTarget is the calendar of the step worker: CalDAV alone without a calendars file, else a
// router over the configured targets whose resources are looked up (linked names) in pool.
func (c Config) calendarTarget(pool *pgxpool.Pool) process.Calendar {
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
			return readmodel.LinkedName(ctx, pool, resource)
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

// HasCalendar reports whether calendar steps are planned: some target is configured.
func (c Config) HasCalendar() bool {
	return c.calendar != nil || c.google != nil || c.microsoft != nil
}
