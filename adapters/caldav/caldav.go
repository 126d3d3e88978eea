package caldav

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-ical"
	"github.com/emersion/go-webdav"
	"github.com/emersion/go-webdav/caldav"
	"github.com/google/uuid"

	"bookingledger/adapters/egress"
	"bookingledger/adapters/process"
)

// Placeholder in the URL template, replaced by the resource's collection name.
const Placeholder = "{resource}"

// Config configures the target.
type Config struct {
	// URLTemplate is the calendar collection of a host resource, e.g.
	// https://dav.example.com/calendars/{resource}/bookings/ ; it must contain {resource}.
	URLTemplate string
	Username    string
	Password    string
	// AllowPrivate allows loopback and private addresses (development sinks, tests).
	AllowPrivate bool
	// Timeout bounds one request (30 s when zero).
	Timeout time.Duration
}

// Target is the CalDAV calendar target.
type Target struct {
	cfg    Config
	http   *http.Client
	client webdav.HTTPClient
}

var _ process.Calendar = (*Target)(nil)

// New checks the configuration and returns the target.
func New(cfg Config) (*Target, error) {
	if !strings.Contains(cfg.URLTemplate, Placeholder) {
		return nil, fmt.Errorf("caldav: URL template must contain %s", Placeholder)
	}
	u, err := url.Parse(strings.ReplaceAll(cfg.URLTemplate, Placeholder, "x"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("caldav: URL template is not an http(s) URL")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	hc := egress.HTTPClient(cfg.AllowPrivate, cfg.Timeout)
	var c webdav.HTTPClient = hc
	if cfg.Username != "" {
		c = webdav.HTTPClientWithBasicAuth(hc, cfg.Username, cfg.Password)
	}
	return &Target{cfg: cfg, http: hc, client: c}, nil
}

// Collection is the collection name of a resource: readable (the resource's last path segment,
// lower-cased, reduced to [a-z0-9-]) and unique (a hash of the whole resource).
func Collection(resource string) string {
	last := resource
	if i := strings.LastIndex(strings.TrimRight(resource, "/"), "/"); i >= 0 {
		last = strings.TrimRight(resource, "/")[i+1:]
	}
	var b strings.Builder
	for _, r := range strings.ToLower(last) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		}
		if b.Len() >= 40 {
			break
		}
	}
	sum := sha256.Sum256([]byte(resource))
	if b.Len() == 0 {
		return hex.EncodeToString(sum[:6])
	}
	return b.String() + "-" + hex.EncodeToString(sum[:4])
}

// Href implements process.Calendar: <collection of resource><key>.ics.
func (t *Target) Href(resource string, key uuid.UUID) (string, error) {
	if resource == "" {
		return "", errors.New("caldav: booking has no host resource")
	}
	return t.CollectionURL(resource) + key.String() + ".ics", nil
}

func encode(ev process.Event) ([]byte, error) {
	e := ical.NewEvent()
	e.Props.SetText(ical.PropUID, ev.UID)
	e.Props.SetDateTime(ical.PropDateTimeStamp, time.Now().UTC())
	e.Props.SetDateTime(ical.PropDateTimeStart, ev.Start.UTC())
	e.Props.SetDateTime(ical.PropDateTimeEnd, ev.End.UTC())
	e.Props.SetText(ical.PropSummary, ev.Summary)
	if ev.Description != "" {
		e.Props.SetText(ical.PropDescription, ev.Description)
	}
	// SEQUENCE is an INTEGER (RFC 5545 3.8.7.4): SetText would write it as SEQUENCE;VALUE=TEXT:1,
	// a value type the property does not take.
	seq := ical.NewProp(ical.PropSequence)
	seq.Value = strconv.Itoa(ev.Sequence)
	e.Props.Set(seq)
	addAttendees(e, ev)
	cal := ical.NewCalendar()
	cal.Props.SetText(ical.PropVersion, "2.0")
	cal.Props.SetText(ical.PropProductID, "-//bookingledger//process steps//EN")
	cal.Children = append(cal.Children, e.Component)
	var buf bytes.Buffer
	if err := ical.NewEncoder(&buf).Encode(cal); err != nil {
		return nil, fmt.Errorf("caldav: encode event: %w", err)
	}
	return buf.Bytes(), nil
}

// Create implements process.Calendar.
func (t *Target) Create(ctx context.Context, href string, ev process.Event) (string, error) {
	return t.put(ctx, href, ev, "If-None-Match", "*")
}

// Update implements process.Calendar.
func (t *Target) Update(ctx context.Context, href, etag string, ev process.Event) (string, error) {
	if etag == "" {
		return t.put(ctx, href, ev, "If-Match", "*")
	}
	return t.put(ctx, href, ev, "If-Match", strconv.Quote(etag))
}

func (t *Target) put(ctx context.Context, href string, ev process.Event, cond, value string) (string, error) {
	body, err := encode(ev)
	if err != nil {
		return "", fmt.Errorf("%w: %w", process.ErrRejected, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, href, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("%w: caldav: %w", process.ErrRejected, err)
	}
	req.Header.Set("Content-Type", ical.MIMEType+"; charset=utf-8")
	req.Header.Set(cond, value)
	resp, err := t.do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusGone {
		// A write the server refused wrote nothing. RFC 4918 answers a PUT into a collection that does
		// not exist with 409 (Radicale); others answer 404 (Xandikos): say which, with its URL.
		return "", t.refusedPut(req.Context(), href, resp)
	}
	if err := statusError("PUT", resp); err != nil {
		return "", err
	}
	etag, _ := strconv.Unquote(resp.Header.Get("ETag"))
	return etag, nil
}

// ErrMissingCollection: the calendar collection a step writes into does not exist (bookingledger
// never creates it while acting; `bookingledger steps setup` does). It wraps process.ErrRejected.
var ErrMissingCollection = errors.New("calendar collection missing")

// refusedPut explains a PUT answered 404, 409 or 410: the collection is missing (PROPFIND finds nothing at
// it), or the server refused the object itself.
func (t *Target) refusedPut(ctx context.Context, href string, resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	coll := href[:strings.LastIndex(href, "/")+1]
	exists, err := t.collectionExists(ctx, coll)
	if err == nil && !exists {
		return fmt.Errorf("%w: %w at %s (PUT answered %s) — create it or run `bookingledger steps setup`",
			process.ErrRejected, ErrMissingCollection, coll, resp.Status)
	}
	return fmt.Errorf("%w: caldav PUT: %s: %s", process.ErrRejected, resp.Status, strings.TrimSpace(string(msg)))
}

// collectionExists asks for the collection's resource type (PROPFIND, Depth 0).
func (t *Target) collectionExists(ctx context.Context, coll string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, "PROPFIND", coll, strings.NewReader(propfindType))
	if err != nil {
		return false, err
	}
	req.Header.Set("Depth", "0")
	req.Header.Set("Content-Type", "application/xml; charset=utf-8")
	resp, err := t.do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return false, nil
	case resp.StatusCode == http.StatusMultiStatus:
		// Some servers (Xandikos) answer a missing resource with a 207 whose response is a 404: the
		// collection exists when its resource type says collection.
		return hasCollectionType(io.LimitReader(resp.Body, 1<<16)), nil
	case resp.StatusCode == http.StatusOK:
		return true, nil
	}
	return false, fmt.Errorf("caldav PROPFIND %s: %s", coll, resp.Status)
}

// hasCollectionType reports whether a PROPFIND answer names a resource type DAV:collection.
func hasCollectionType(r io.Reader) bool {
	d := xml.NewDecoder(r)
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Space == "DAV:" && se.Name.Local == "collection" {
			return true
		}
	}
}

const propfindType = `<?xml version="1.0" encoding="utf-8"?><propfind xmlns="DAV:"><prop><resourcetype/></prop></propfind>`

func (t *Target) do(req *http.Request) (*http.Response, error) {
	if t.cfg.Username != "" {
		req.SetBasicAuth(t.cfg.Username, t.cfg.Password)
	}
	resp, err := t.http.Do(req)
	if err != nil {
		if errors.Is(err, egress.ErrForbiddenAddress) {
			return nil, fmt.Errorf("%w: caldav %s: %w", process.ErrRejected, req.Method, err)
		}
		// A request that never left (refused, no such name) did nothing; one that may have reached
		// the server is unknown, and the caller probes.
		return nil, process.TransportError("caldav "+req.Method, err)
	}
	return resp, nil
}

// statusError says what a non-2xx answer proves.
func statusError(method string, resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	err := fmt.Errorf("caldav %s: %s: %s", method, resp.Status, strings.TrimSpace(string(msg)))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %w", process.ErrPrecondition, err)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return fmt.Errorf("%w: %w", process.ErrNotFound, err)
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout:
		// The server answered that it could not process the request: nothing was written.
		return fmt.Errorf("%w: %w", process.ErrNothingDone, err)
	default:
		return fmt.Errorf("%w: %w", process.ErrRejected, err)
	}
}

// Get implements process.Calendar with go-webdav's CalDAV client.
func (t *Target) Get(ctx context.Context, href string) (process.Object, error) {
	u, err := url.Parse(href)
	if err != nil {
		return process.Object{}, fmt.Errorf("%w: caldav: %w", process.ErrRejected, err)
	}
	// A HEAD first: go-webdav's client reports a 404 as an error without its status.
	head, err := http.NewRequestWithContext(ctx, http.MethodHead, href, nil)
	if err != nil {
		return process.Object{}, fmt.Errorf("%w: caldav: %w", process.ErrRejected, err)
	}
	resp, err := t.do(head)
	if err != nil {
		return process.Object{}, err
	}
	resp.Body.Close()
	if err := statusError("HEAD", resp); err != nil {
		return process.Object{}, err
	}
	client, err := caldav.NewClient(t.client, u.Scheme+"://"+u.Host)
	if err != nil {
		return process.Object{}, fmt.Errorf("%w: caldav: %w", process.ErrRejected, err)
	}
	co, err := client.GetCalendarObject(ctx, u.Path)
	if err != nil {
		return process.Object{}, fmt.Errorf("caldav GET: %w", err)
	}
	o := process.Object{ETag: co.ETag}
	for _, ev := range co.Data.Events() {
		o.UID, _ = ev.Props.Text(ical.PropUID)
		o.Start, _ = ev.DateTimeStart(time.UTC)
		o.End, _ = ev.DateTimeEnd(time.UTC)
	}
	return o, nil
}

// Delete implements process.Calendar.
func (t *Target) Delete(ctx context.Context, href string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, href, nil)
	if err != nil {
		return fmt.Errorf("%w: caldav: %w", process.ErrRejected, err)
	}
	resp, err := t.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return statusError("DELETE", resp)
}
