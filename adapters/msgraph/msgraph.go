package msgraph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"bookingledger/adapters/egress"
	"bookingledger/adapters/process"
)

// DefaultEndpoint is Graph's base URL.
const DefaultEndpoint = "https://graph.microsoft.com/v1.0/"

// KeyProperty is the extended property that stamps our key: a string property in bookingledger's own
// property set.
const KeyProperty = "String {5b2c7d0e-3f0a-4c55-9d1e-6a8b4f2e9c17} Name bookingledgerKey"

// Mailbox says where a resource's events go.
type Mailbox struct {
	// User is the mailbox's user id or userPrincipalName.
	User string
	// Calendar is a calendar id; empty: the user's default calendar.
	Calendar string
}

// Config configures the target.
type Config struct {
	// Endpoint is Graph's base URL (DefaultEndpoint when empty; tests point it at a fake).
	Endpoint string
	// Mailboxes maps a host resource to its mailbox; ok is false when it has none here.
	Mailboxes func(resource string) (m Mailbox, ok bool)
	// TenantID, ClientID, ClientSecret: the app registration's client credentials. Without a ClientID
	// requests carry no token (tests).
	TenantID, ClientID, ClientSecret string
	// TokenURL overrides https://login.microsoftonline.com/<tenant>/oauth2/v2.0/token (tests).
	TokenURL string
	// AllowPrivate allows loopback and private addresses (tests).
	AllowPrivate bool
	// Timeout bounds one request (30 s when zero).
	Timeout time.Duration
}

// Target is the Microsoft Graph calendar target.
type Target struct {
	cfg  Config
	http *http.Client
}

var _ process.Calendar = (*Target)(nil)

// New checks the configuration and returns the target. The secret is never logged.
func New(cfg Config) (*Target, error) {
	if cfg.Endpoint == "" {
		cfg.Endpoint = DefaultEndpoint
	}
	if !strings.HasSuffix(cfg.Endpoint, "/") {
		cfg.Endpoint += "/"
	}
	if u, err := url.Parse(cfg.Endpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("msgraph: endpoint is not an http(s) URL")
	}
	if cfg.Mailboxes == nil {
		return nil, errors.New("msgraph: no mailboxes configured")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	hc := egress.HTTPClient(cfg.AllowPrivate, cfg.Timeout)
	if cfg.ClientID != "" {
		if cfg.ClientSecret == "" || (cfg.TenantID == "" && cfg.TokenURL == "") {
			return nil, errors.New("msgraph: client credentials need a tenant, a client id and a client secret")
		}
		tokenURL := cfg.TokenURL
		if tokenURL == "" {
			tokenURL = "https://login.microsoftonline.com/" + url.PathEscape(cfg.TenantID) + "/oauth2/v2.0/token"
		}
		cc := clientcredentials.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, TokenURL: tokenURL,
			Scopes: []string{"https://graph.microsoft.com/.default"}, AuthStyle: oauth2.AuthStyleInParams}
		tokCtx := context.WithValue(context.Background(), oauth2.HTTPClient, egress.HTTPClient(cfg.AllowPrivate, cfg.Timeout))
		hc.Transport = &oauth2.Transport{Source: cc.TokenSource(tokCtx), Base: hc.Transport}
	}
	return &Target{cfg: cfg, http: hc}, nil
}

// Endpoint is the base URL every href of this target starts with.
func (t *Target) Endpoint() string { return t.cfg.Endpoint }

// Href implements process.Calendar.
func (t *Target) Href(resource string, key uuid.UUID) (string, error) {
	m, ok := t.cfg.Mailboxes(resource)
	if !ok || m.User == "" {
		return "", fmt.Errorf("msgraph: no Microsoft 365 mailbox configured for resource %s", resource)
	}
	coll := t.cfg.Endpoint + "users/" + url.PathEscape(m.User) + "/calendar/events"
	if m.Calendar != "" {
		coll = t.cfg.Endpoint + "users/" + url.PathEscape(m.User) + "/calendars/" + url.PathEscape(m.Calendar) + "/events"
	}
	return coll + "#key=" + key.String(), nil
}

type ref struct{ collection, user, key string }

func (t *Target) parse(href string) (ref, error) {
	coll, frag, _ := strings.Cut(href, "#")
	key, ok := strings.CutPrefix(frag, "key=")
	rest, under := strings.CutPrefix(coll, t.cfg.Endpoint+"users/")
	if !ok || !under {
		return ref{}, fmt.Errorf("%w: msgraph: %s is not an event of this target", process.ErrRejected, href)
	}
	user, _, _ := strings.Cut(rest, "/")
	return ref{collection: coll, user: t.cfg.Endpoint + "users/" + user, key: key}, nil
}

// dateTime is Graph's dateTimeTimeZone.
type dateTime struct {
	DateTime string `json:"dateTime"`
	TimeZone string `json:"timeZone"`
}

const graphTime = "2006-01-02T15:04:05.9999999"

func at(t time.Time) dateTime { return dateTime{DateTime: t.UTC().Format(graphTime), TimeZone: "UTC"} }

func (d dateTime) time() time.Time {
	loc := time.UTC
	if d.TimeZone != "" && d.TimeZone != "UTC" {
		if l, err := time.LoadLocation(d.TimeZone); err == nil {
			loc = l
		}
	}
	v, _ := time.ParseInLocation(graphTime, d.DateTime, loc)
	return v
}

type property struct {
	ID    string `json:"id"`
	Value string `json:"value"`
}

type event struct {
	ID         string     `json:"id,omitempty"`
	ETag       string     `json:"@odata.etag,omitempty"`
	Subject    string     `json:"subject,omitempty"`
	Body       *itemBody  `json:"body,omitempty"`
	Start      *dateTime  `json:"start,omitempty"`
	End        *dateTime  `json:"end,omitempty"`
	TxID       string     `json:"transactionId,omitempty"`
	Properties []property `json:"singleValueExtendedProperties,omitempty"`
}

// maxRetryAfter bounds how long one request waits for a Retry-After within its call.
const maxRetries = 3

// call sends one request (again after a 429/503 whose Retry-After fits in ctx) and decodes a 2xx
// answer into out. what names the call; write says whether it would change the calendar.
func (t *Target) call(ctx context.Context, what, method, u, ifMatch string, body, out any, write bool) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("%w: msgraph: %w", process.ErrRejected, err)
		}
	}
	for try := 0; ; try++ {
		req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(payload))
		if err != nil {
			return fmt.Errorf("%w: msgraph: %w", process.ErrRejected, err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Prefer", `outlook.timezone="UTC"`)
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		resp, err := t.http.Do(req)
		if err != nil {
			if errors.Is(err, egress.ErrForbiddenAddress) {
				return fmt.Errorf("%w: msgraph %s: %w", process.ErrRejected, what, err)
			}
			return process.TransportError("msgraph "+what, err)
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			if out != nil && len(data) > 0 {
				if err := json.Unmarshal(data, out); err != nil {
					return fmt.Errorf("msgraph %s: answer: %w", what, err) // it acted; what it said is unreadable
				}
			}
			return nil
		}
		if (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && try < maxRetries {
			if wait, ok := retryAfter(resp.Header.Get("Retry-After")); ok && fits(ctx, wait) {
				select {
				case <-time.After(wait):
					continue
				case <-ctx.Done():
				}
			}
		}
		return statusError(what, resp, data, write)
	}
}

func retryAfter(v string) (time.Duration, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// fits: waiting d leaves at least half of what remains of ctx for the request.
func fits(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok && d <= 10*time.Second || ok && 2*d < time.Until(dl)
}

func statusError(what string, resp *http.Response, data []byte, write bool) error {
	var ge struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(data, &ge)
	e := fmt.Errorf("msgraph %s: %s: %s %s", what, resp.Status, ge.Error.Code, ge.Error.Message)
	switch code := resp.StatusCode; {
	case code == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %w", process.ErrPrecondition, e)
	case code == http.StatusNotFound && !write:
		return fmt.Errorf("%w: %w", process.ErrNotFound, e)
	case code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			e = fmt.Errorf("%w (Retry-After %s s)", e, ra)
		}
		return fmt.Errorf("%w: %w", process.ErrNothingDone, e)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%w: %w (check the app's client credentials and its Calendars.ReadWrite permission)", process.ErrRejected, e)
	case code == http.StatusNotFound:
		return fmt.Errorf("%w: %w (the mailbox or calendar does not exist)", process.ErrRejected, e)
	}
	return fmt.Errorf("%w: %w", process.ErrRejected, e)
}

// find looks the event with our key up.
func (t *Target) find(ctx context.Context, r ref) (event, error) {
	q := url.Values{}
	q.Set("$filter", fmt.Sprintf("singleValueExtendedProperties/Any(ep: ep/id eq '%s' and ep/value eq '%s')", KeyProperty, r.key))
	q.Set("$expand", fmt.Sprintf("singleValueExtendedProperties($filter=id eq '%s')", KeyProperty))
	q.Set("$select", "id,subject,start,end")
	var list struct {
		Value []event `json:"value"`
	}
	if err := t.call(ctx, "lookup", http.MethodGet, r.collection+"?"+strings.ReplaceAll(q.Encode(), "+", "%20"), "", nil, &list, false); err != nil {
		return event{}, err
	}
	switch len(list.Value) {
	case 0:
		return event{}, fmt.Errorf("%w: msgraph: no event with key %s", process.ErrNotFound, r.key)
	case 1:
		return list.Value[0], nil
	}
	return event{}, fmt.Errorf("%w: msgraph: %d events carry key %s", process.ErrRejected, len(list.Value), r.key)
}

func mine(ev process.Event) event {
	s, e := at(ev.Start), at(ev.End)
	out := event{Subject: ev.Summary, Start: &s, End: &e}
	// A seated booking's attendees are in the body's text, never in attendees (Graph would invite them).
	if text := ev.DescriptionWithAttendees(); text != "" {
		out.Body = &itemBody{ContentType: "text", Content: text}
	}
	return out
}

// slotOnly is what an update changes: the subject and the slot; the body is written by the create
// only, so that a host's edits of it are kept.
func slotOnly(ev process.Event) event {
	out := mine(ev)
	if !ev.Seated { // a seated booking's body carries its attendee list, which an update keeps current
		out.Body = nil
	}
	return out
}

// itemBody is an event's body (Graph itemBody): our description, as text.
type itemBody struct {
	ContentType string `json:"contentType"`
	Content     string `json:"content"`
}

// Create implements process.Calendar: POST with transactionId and our property.
func (t *Target) Create(ctx context.Context, href string, ev process.Event) (string, error) {
	r, err := t.parse(href)
	if err != nil {
		return "", err
	}
	body := mine(ev)
	body.TxID = r.key
	body.Properties = []property{{ID: KeyProperty, Value: r.key}}
	var got event
	if err := t.call(ctx, "create", http.MethodPost, r.collection, "", body, &got, true); err != nil {
		return "", err
	}
	return got.ETag, nil
}

// Update implements process.Calendar: PATCH with If-Match etag (the one the lookup finds when none is
// stored); on 412 re-read and retry once with the current ETag.
func (t *Target) Update(ctx context.Context, href, etag string, ev process.Event) (string, error) {
	r, err := t.parse(href)
	if err != nil {
		return "", err
	}
	cur, err := t.find(ctx, r)
	if err != nil {
		if errors.Is(err, process.ErrNotFound) {
			return "", fmt.Errorf("%w: %w (deleted by someone else?)", process.ErrRejected, err)
		}
		return "", err
	}
	if etag == "" {
		etag = cur.ETag
	}
	var got event
	err = t.call(ctx, "update", http.MethodPatch, r.user+"/events/"+url.PathEscape(cur.ID), etag, slotOnly(ev), &got, true)
	if errors.Is(err, process.ErrPrecondition) {
		if cur, err = t.find(ctx, r); err != nil {
			return "", err
		}
		err = t.call(ctx, "update", http.MethodPatch, r.user+"/events/"+url.PathEscape(cur.ID), cur.ETag, slotOnly(ev), &got, true)
	}
	if err != nil {
		return "", err
	}
	return got.ETag, nil
}

// Get implements process.Calendar by the lookup.
func (t *Target) Get(ctx context.Context, href string) (process.Object, error) {
	r, err := t.parse(href)
	if err != nil {
		return process.Object{}, err
	}
	got, err := t.find(ctx, r)
	if err != nil {
		return process.Object{}, err
	}
	o := process.Object{ETag: got.ETag}
	for _, p := range got.Properties {
		if p.ID == KeyProperty || strings.EqualFold(p.ID, KeyProperty) {
			o.UID = p.Value
		}
	}
	if o.UID == "" {
		o.UID = r.key // the filter matched it
	}
	if got.Start != nil {
		o.Start = got.Start.time()
	}
	if got.End != nil {
		o.End = got.End.time()
	}
	return o, nil
}

// Delete implements process.Calendar: no event with our key, or a 404, is ErrNotFound (done).
func (t *Target) Delete(ctx context.Context, href string) error {
	r, err := t.parse(href)
	if err != nil {
		return err
	}
	cur, err := t.find(ctx, r)
	if err != nil {
		return err
	}
	err = t.call(ctx, "delete", http.MethodDelete, r.user+"/events/"+url.PathEscape(cur.ID), "", nil, nil, false)
	return err
}
