package caldavsink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-ical"
	"github.com/emersion/go-webdav"
	"github.com/emersion/go-webdav/caldav"
)

// Object is one stored calendar object.
type Object struct {
	Path    string
	ETag    string
	UID     string
	Summary string
	// Description is the event's DESCRIPTION, unescaped ("" when none).
	Description string
	Start       time.Time
	End         time.Time
	ModTime     time.Time
	// Data is the object's iCalendar text as stored.
	Data []byte
}

// Change is one successful write: method PUT (Created or not) or DELETE.
type Change struct {
	Method  string
	Created bool
	Object  Object
}

// Config configures a server.
type Config struct {
	// Addr to listen on; 127.0.0.1:0 when empty. Only loopback addresses are accepted.
	Addr string
	// OnChange, when set, is called after every successful PUT and DELETE, outside the store's lock.
	OnChange func(Change)
	// Fault, when set, sees every request first; a non-zero status is answered instead of serving it.
	Fault func(r *http.Request) int
}

// Server is a running CalDAV server.
type Server struct {
	Store *Store
	ln    net.Listener
	srv   *http.Server
}

// Start listens and serves until Close.
func Start(cfg Config) (*Server, error) {
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("caldav sink: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("caldav sink: address %q is not a loopback address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("caldav sink: listen on %s: %w", addr, err)
	}
	st := NewStore(cfg.OnChange)
	s := &Server{Store: st, ln: ln, srv: &http.Server{Handler: Handler(st, cfg.Fault), ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the server's base URL, e.g. http://127.0.0.1:40123.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// Handler serves st over CalDAV; fault (optional) may answer a request with a status of its own.
func Handler(st *Store, fault func(*http.Request) int) http.Handler {
	h := &caldav.Handler{Backend: st}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fault != nil {
			if code := fault(r); code != 0 {
				http.Error(w, http.StatusText(code), code)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// Store is the in-memory caldav.Backend. Safe for concurrent use.
type Store struct {
	onChange func(Change)
	mu       sync.Mutex
	objects  map[string]Object
}

var _ caldav.Backend = (*Store)(nil)

// NewStore returns an empty store; onChange (optional) sees every write.
func NewStore(onChange func(Change)) *Store {
	return &Store{onChange: onChange, objects: map[string]Object{}}
}

// Objects returns every stored object, by path.
func (s *Store) Objects() []Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Object, 0, len(s.objects))
	for _, o := range s.objects {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// CurrentUserPrincipal implements webdav.UserPrincipalBackend.
func (s *Store) CurrentUserPrincipal(context.Context) (string, error) { return "/", nil }

// CalendarHomeSetPath implements caldav.Backend.
func (s *Store) CalendarHomeSetPath(context.Context) (string, error) { return "/", nil }

// CreateCalendar implements caldav.Backend: every collection exists already.
func (s *Store) CreateCalendar(context.Context, *caldav.Calendar) error { return nil }

// ListCalendars implements caldav.Backend: the collections that hold objects.
func (s *Store) ListCalendars(context.Context) ([]caldav.Calendar, error) {
	seen := map[string]bool{}
	var out []caldav.Calendar
	for _, o := range s.Objects() {
		dir := path.Dir(o.Path) + "/"
		if !seen[dir] {
			seen[dir] = true
			out = append(out, caldav.Calendar{Path: dir, Name: dir, SupportedComponentSet: []string{ical.CompEvent}})
		}
	}
	return out, nil
}

// GetCalendar implements caldav.Backend.
func (s *Store) GetCalendar(_ context.Context, p string) (*caldav.Calendar, error) {
	return &caldav.Calendar{Path: p, Name: p, SupportedComponentSet: []string{ical.CompEvent}}, nil
}

func notFound(p string) error {
	return webdav.NewHTTPError(http.StatusNotFound, fmt.Errorf("caldav sink: no object at %s", p))
}

func (o Object) calendarObject() (*caldav.CalendarObject, error) {
	cal, err := ical.NewDecoder(bytes.NewReader(o.Data)).Decode()
	if err != nil {
		return nil, err
	}
	return &caldav.CalendarObject{Path: o.Path, ModTime: o.ModTime, ContentLength: int64(len(o.Data)), ETag: o.ETag, Data: cal}, nil
}

// GetCalendarObject implements caldav.Backend.
func (s *Store) GetCalendarObject(_ context.Context, p string, _ *caldav.CalendarCompRequest) (*caldav.CalendarObject, error) {
	s.mu.Lock()
	o, ok := s.objects[p]
	s.mu.Unlock()
	if !ok {
		return nil, notFound(p)
	}
	return o.calendarObject()
}

// ListCalendarObjects implements caldav.Backend.
func (s *Store) ListCalendarObjects(_ context.Context, p string, _ *caldav.CalendarCompRequest) ([]caldav.CalendarObject, error) {
	var out []caldav.CalendarObject
	for _, o := range s.Objects() {
		if path.Dir(o.Path) == path.Clean(p) {
			co, err := o.calendarObject()
			if err != nil {
				return nil, err
			}
			out = append(out, *co)
		}
	}
	return out, nil
}

// QueryCalendarObjects implements caldav.Backend with caldav's own filter matching.
func (s *Store) QueryCalendarObjects(ctx context.Context, p string, q *caldav.CalendarQuery) ([]caldav.CalendarObject, error) {
	all, err := s.ListCalendarObjects(ctx, p, &q.CompRequest)
	if err != nil {
		return nil, err
	}
	return caldav.Filter(q, all)
}

// PutCalendarObject implements caldav.Backend, with the preconditions of If-None-Match and If-Match.
func (s *Store) PutCalendarObject(_ context.Context, p string, cal *ical.Calendar, opts *caldav.PutCalendarObjectOptions) (*caldav.CalendarObject, error) {
	var buf bytes.Buffer
	if err := ical.NewEncoder(&buf).Encode(cal); err != nil {
		return nil, webdav.NewHTTPError(http.StatusBadRequest, err)
	}
	sum := sha256.Sum256(buf.Bytes())
	o := Object{Path: p, ETag: hex.EncodeToString(sum[:8]), ModTime: time.Now().UTC(), Data: buf.Bytes()}
	for _, ev := range cal.Events() {
		o.UID, _ = ev.Props.Text(ical.PropUID)
		o.Summary, _ = ev.Props.Text(ical.PropSummary)
		o.Description, _ = ev.Props.Text(ical.PropDescription)
		o.Start, _ = ev.DateTimeStart(time.UTC)
		o.End, _ = ev.DateTimeEnd(time.UTC)
	}
	s.mu.Lock()
	old, exists := s.objects[p]
	if opts != nil {
		if opts.IfNoneMatch.IsWildcard() && exists {
			s.mu.Unlock()
			return nil, webdav.NewHTTPError(http.StatusPreconditionFailed, errors.New("caldav sink: object exists (If-None-Match: *)"))
		}
		if opts.IfMatch.IsSet() {
			want, err := opts.IfMatch.ETag()
			if !exists || (!opts.IfMatch.IsWildcard() && (err != nil || want != old.ETag)) {
				s.mu.Unlock()
				return nil, webdav.NewHTTPError(http.StatusPreconditionFailed, errors.New("caldav sink: ETag does not match (If-Match)"))
			}
		}
	}
	s.objects[p] = o
	s.mu.Unlock()
	if s.onChange != nil {
		s.onChange(Change{Method: http.MethodPut, Created: !exists, Object: o})
	}
	return o.calendarObject()
}

// DeleteCalendarObject implements caldav.Backend.
func (s *Store) DeleteCalendarObject(_ context.Context, p string) error {
	s.mu.Lock()
	o, ok := s.objects[p]
	delete(s.objects, p)
	s.mu.Unlock()
	if !ok {
		return notFound(p)
	}
	if s.onChange != nil {
		s.onChange(Change{Method: http.MethodDelete, Object: o})
	}
	return nil
}

// Summary renders an object in one line for logs: path, UID and time.
func (o Object) String() string {
	return strings.Join([]string{o.Path, "uid=" + o.UID, o.Start.Format(time.RFC3339) + "–" + o.End.Format(time.RFC3339)}, " ")
}
