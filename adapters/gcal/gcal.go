package gcal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	calendar "google.golang.org/api/calendar/v3"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"bookingledger/adapters/egress"
	"bookingledger/adapters/process"
)

// DefaultEndpoint is the Calendar API's base URL.
const DefaultEndpoint = "https://www.googleapis.com/calendar/v3/"

// KeyProperty is the private extended property that stamps our key on the event.
const KeyProperty = "bookingledgerKey"

// Calendar says where a resource's events go.
type Calendar struct {
	// ID is the calendar id ("primary", or the calendar's address).
	ID string
	// As is the Workspace user a service account acts as (domain-wide delegation); empty with a
	// refresh token (the token's own user) or a calendar shared with the service account.
	As string
}

// Config configures the target.
type Config struct {
	// Endpoint is the API's base URL (DefaultEndpoint when empty; tests point it at a fake).
	Endpoint string
	// Calendars maps a host resource to its calendar; ok is false when it has none here.
	Calendars func(resource string) (c Calendar, ok bool)
	// Credentials is a service account key (JSON, type service_account) or an OAuth client's
	// authorized user with a refresh token (type authorized_user). Nil: no authentication (tests).
	Credentials []byte
	// AllowPrivate allows loopback and private addresses (tests).
	AllowPrivate bool
	// Timeout bounds one request (30 s when zero).
	Timeout time.Duration
}

// Target is the Google Calendar target.
type Target struct {
	cfg      Config
	mu       sync.Mutex
	services map[string]*calendar.Service // by As
}

var _ process.Calendar = (*Target)(nil)

// New checks the configuration and returns the target. The credentials are parsed here (a malformed
// key stops serve at start) and never logged.
func New(cfg Config) (*Target, error) {
	if cfg.Endpoint == "" {
		cfg.Endpoint = DefaultEndpoint
	}
	if !strings.HasSuffix(cfg.Endpoint, "/") {
		cfg.Endpoint += "/"
	}
	if u, err := url.Parse(cfg.Endpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("gcal: endpoint is not an http(s) URL")
	}
	if cfg.Calendars == nil {
		return nil, errors.New("gcal: no calendars configured")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Credentials != nil {
		if _, err := credentialsType(cfg.Credentials); err != nil {
			return nil, err
		}
	}
	return &Target{cfg: cfg, services: map[string]*calendar.Service{}}, nil
}

// Endpoint is the base URL every href of this target starts with.
func (t *Target) Endpoint() string { return t.cfg.Endpoint }

func credentialsType(j []byte) (google.CredentialsType, error) {
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(j, &f); err != nil {
		return "", errors.New("gcal: credentials are not JSON") // never the content: it is a secret
	}
	switch t := google.CredentialsType(f.Type); t {
	case google.ServiceAccount, google.AuthorizedUser:
		return t, nil
	}
	return "", fmt.Errorf("gcal: credentials of type %q: want service_account or authorized_user", f.Type)
}

// service returns the API client acting as user as.
func (t *Target) service(ctx context.Context, as string) (*calendar.Service, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.services[as]; s != nil {
		return s, nil
	}
	hc := egress.HTTPClient(t.cfg.AllowPrivate, t.cfg.Timeout)
	opts := []option.ClientOption{option.WithEndpoint(t.cfg.Endpoint)}
	if t.cfg.Credentials == nil {
		opts = append(opts, option.WithoutAuthentication())
	} else {
		typ, err := credentialsType(t.cfg.Credentials)
		if err != nil {
			return nil, err
		}
		creds, err := google.CredentialsFromJSONWithTypeAndParams(context.WithoutCancel(ctx), t.cfg.Credentials, typ,
			google.CredentialsParams{Scopes: []string{calendar.CalendarEventsScope}, Subject: as})
		if err != nil {
			return nil, fmt.Errorf("gcal: credentials: %w", err)
		}
		hc.Transport = &oauth2.Transport{Source: creds.TokenSource, Base: hc.Transport}
	}
	s, err := calendar.NewService(context.WithoutCancel(ctx), append(opts, option.WithHTTPClient(hc))...)
	if err != nil {
		return nil, fmt.Errorf("gcal: client: %w", err)
	}
	t.services[as] = s
	return s, nil
}

// EventID is the event id of a step key: its 32 lower-case hex digits (base32hex).
func EventID(key uuid.UUID) string { return strings.ReplaceAll(key.String(), "-", "") }

// Href implements process.Calendar.
func (t *Target) Href(resource string, key uuid.UUID) (string, error) {
	c, ok := t.cfg.Calendars(resource)
	if !ok || c.ID == "" {
		return "", fmt.Errorf("gcal: no Google calendar configured for resource %s", resource)
	}
	h := t.cfg.Endpoint + "calendars/" + url.PathEscape(c.ID) + "/events/" + EventID(key)
	if c.As != "" {
		h += "#as=" + url.QueryEscape(c.As)
	}
	return h, nil
}

type ref struct{ calendar, event, as string }

func (t *Target) parse(href string) (ref, error) {
	rest, ok := strings.CutPrefix(href, t.cfg.Endpoint+"calendars/")
	if !ok {
		return ref{}, fmt.Errorf("%w: gcal: %s is not an event of this target", process.ErrRejected, href)
	}
	rest, frag, _ := strings.Cut(rest, "#")
	cal, ev, ok := strings.Cut(rest, "/events/")
	if !ok {
		return ref{}, fmt.Errorf("%w: gcal: %s is not an event URL", process.ErrRejected, href)
	}
	var r ref
	var err error
	if r.calendar, err = url.PathUnescape(cal); err != nil {
		return ref{}, fmt.Errorf("%w: gcal: %w", process.ErrRejected, err)
	}
	r.event = ev
	if as, ok := strings.CutPrefix(frag, "as="); ok {
		r.as, _ = url.QueryUnescape(as)
	}
	return r, nil
}

func toEvent(key string, ev process.Event) *calendar.Event {
	return &calendar.Event{
		Summary:     ev.Summary,
		Description: ev.DescriptionWithAttendees(), // a seated booking's attendees: in the text, never in attendees
		Start:       &calendar.EventDateTime{DateTime: ev.Start.UTC().Format(time.RFC3339), TimeZone: "UTC"},
		End:         &calendar.EventDateTime{DateTime: ev.End.UTC().Format(time.RFC3339), TimeZone: "UTC"},
		Status:      "confirmed",
		ExtendedProperties: &calendar.EventExtendedProperties{
			Private: map[string]string{KeyProperty: key},
		},
	}
}

// classify says what a failed call proves. write: the call would have changed the calendar.
func classify(what string, err error, write bool) error {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		var ue *url.Error
		if errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return process.TransportError("gcal "+what, err)
		}
		return fmt.Errorf("%w: gcal %s: %w", process.ErrRejected, what, err) // never sent (a bad request)
	}
	reason := ""
	if len(ge.Errors) > 0 {
		reason = ge.Errors[0].Reason
	}
	e := fmt.Errorf("gcal %s: %d %s", what, ge.Code, ge.Message)
	switch {
	case ge.Code == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %w", process.ErrPrecondition, e)
	case ge.Code == http.StatusConflict && write:
		return fmt.Errorf("%w: %w", errDuplicate, e)
	case (ge.Code == http.StatusNotFound || ge.Code == http.StatusGone) && !write:
		return fmt.Errorf("%w: %w", process.ErrNotFound, e)
	case ge.Code >= 500 || ge.Code == http.StatusTooManyRequests || ge.Code == http.StatusRequestTimeout ||
		ge.Code == http.StatusForbidden && (reason == "rateLimitExceeded" || reason == "userRateLimitExceeded"):
		return fmt.Errorf("%w: %w", process.ErrNothingDone, e) // refused for now: nothing was written
	case ge.Code == http.StatusUnauthorized:
		return fmt.Errorf("%w: %w (check the credentials and, for a service account, its domain-wide delegation)", process.ErrRejected, e)
	case ge.Code == http.StatusNotFound:
		return fmt.Errorf("%w: %w (the calendar does not exist, or is not shared with these credentials)", process.ErrRejected, e)
	}
	return fmt.Errorf("%w: %w", process.ErrRejected, e)
}

// errDuplicate: an insert met an event with the same id (409).
var errDuplicate = errors.New("event id exists")

// Create implements process.Calendar: insert with the key's id. The id being taken means our earlier
// insert landed (the worker's probe finds it) or it was deleted since (revived here by an update).
func (t *Target) Create(ctx context.Context, href string, ev process.Event) (string, error) {
	r, err := t.parse(href)
	if err != nil {
		return "", err
	}
	svc, err := t.service(ctx, r.as)
	if err != nil {
		return "", fmt.Errorf("%w: %w", process.ErrRejected, err)
	}
	body := toEvent(ev.UID, ev)
	body.Id = r.event
	got, err := svc.Events.Insert(r.calendar, body).Context(ctx).Do()
	if err == nil {
		return got.Etag, nil
	}
	err = classify("insert", err, true)
	if !errors.Is(err, errDuplicate) {
		return "", err
	}
	old, gerr := svc.Events.Get(r.calendar, r.event).Context(ctx).Do()
	if gerr != nil {
		return "", classify("get", gerr, false)
	}
	if old.Status != "cancelled" {
		return "", fmt.Errorf("%w: %w", process.ErrPrecondition, err) // there: the worker's probe decides
	}
	// Deleted: the id stays reserved; an update brings the event back.
	return t.put(ctx, svc, r, old, ev)
}

// put writes our fields onto cur and updates it with If-Match cur.Etag.
func (t *Target) put(ctx context.Context, svc *calendar.Service, r ref, cur *calendar.Event, ev process.Event) (string, error) {
	mine := toEvent(ev.UID, ev)
	// The description stays cur's: our own (a first PUT builds cur from ev), or a host's edit of it.
	cur.Summary, cur.Start, cur.End, cur.Status = mine.Summary, mine.Start, mine.End, mine.Status
	if ev.Seated {
		cur.Description = mine.Description // the attendee list is ours to keep current (an erasure rewrites it)
	}
	if cur.ExtendedProperties == nil {
		cur.ExtendedProperties = &calendar.EventExtendedProperties{}
	}
	if cur.ExtendedProperties.Private == nil {
		cur.ExtendedProperties.Private = map[string]string{}
	}
	cur.ExtendedProperties.Private[KeyProperty] = ev.UID
	call := svc.Events.Update(r.calendar, r.event, cur).Context(ctx)
	if cur.Etag != "" {
		call.Header().Set("If-Match", cur.Etag)
	}
	got, err := call.Do()
	if err != nil {
		return "", classify("update", err, true)
	}
	return got.Etag, nil
}

// Update implements process.Calendar: update with If-Match etag; on 412 re-read and retry once with
// the current ETag, keeping what others changed except the slot and summary.
func (t *Target) Update(ctx context.Context, href, etag string, ev process.Event) (string, error) {
	r, err := t.parse(href)
	if err != nil {
		return "", err
	}
	svc, err := t.service(ctx, r.as)
	if err != nil {
		return "", fmt.Errorf("%w: %w", process.ErrRejected, err)
	}
	body := toEvent(ev.UID, ev)
	body.Etag = etag
	tag, err := t.put(ctx, svc, r, body, ev)
	if !errors.Is(err, process.ErrPrecondition) {
		return tag, err
	}
	cur, gerr := svc.Events.Get(r.calendar, r.event).Context(ctx).Do()
	if gerr != nil {
		return "", classify("get", gerr, false)
	}
	return t.put(ctx, svc, r, cur, ev)
}

// Get implements process.Calendar. A deleted (cancelled) event is not there.
func (t *Target) Get(ctx context.Context, href string) (process.Object, error) {
	r, err := t.parse(href)
	if err != nil {
		return process.Object{}, err
	}
	svc, err := t.service(ctx, r.as)
	if err != nil {
		return process.Object{}, fmt.Errorf("%w: %w", process.ErrRejected, err)
	}
	got, err := svc.Events.Get(r.calendar, r.event).Context(ctx).Do()
	if err != nil {
		return process.Object{}, classify("get", err, false)
	}
	if got.Status == "cancelled" {
		return process.Object{}, fmt.Errorf("%w: gcal: event %s was deleted", process.ErrNotFound, r.event)
	}
	o := process.Object{ETag: got.Etag}
	if got.ExtendedProperties != nil {
		o.UID = got.ExtendedProperties.Private[KeyProperty]
	}
	if o.UID == "" {
		if k, err := uuid.Parse(got.Id); err == nil {
			o.UID = k.String()
		}
	}
	if got.Start != nil {
		o.Start, _ = time.Parse(time.RFC3339, got.Start.DateTime)
	}
	if got.End != nil {
		o.End, _ = time.Parse(time.RFC3339, got.End.DateTime)
	}
	return o, nil
}

// Delete implements process.Calendar: 404 and 410 (deleted already) are ErrNotFound (done).
func (t *Target) Delete(ctx context.Context, href string) error {
	r, err := t.parse(href)
	if err != nil {
		return err
	}
	svc, err := t.service(ctx, r.as)
	if err != nil {
		return fmt.Errorf("%w: %w", process.ErrRejected, err)
	}
	err = svc.Events.Delete(r.calendar, r.event).Context(ctx).Do()
	if err == nil {
		return nil
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) && (ge.Code == http.StatusNotFound || ge.Code == http.StatusGone) {
		return fmt.Errorf("%w: gcal delete: %d %s", process.ErrNotFound, ge.Code, ge.Message)
	}
	return classify("delete", err, true)
}
