package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Store is what the authenticator needs from storage (adapters/postgres/tokens implements it).
type Store interface {
	// Token returns the token with id, or ErrNotFound.
	Token(ctx context.Context, id string) (Token, error)
	// TouchToken records that the token was used at at.
	TouchToken(ctx context.Context, id string, at time.Time) error
	CreateSession(ctx context.Context, s Session) error
	// SessionToken returns the session whose cookie hashes to hash and its token, or ErrNotFound.
	SessionToken(ctx context.Context, hash []byte) (Session, Token, error)
	DeleteSession(ctx context.Context, hash []byte) error
}

// Session is a signed-in browser: its cookie's hash, bound to the token it signed in with, so that
// revoking or expiring the token ends the session too.
type Session struct {
	Hash      []byte
	TokenID   string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// MetricFailures counts refused requests to the admin surface by reason.
const MetricFailures = "bookingledger_api_auth_failures_total"

// Failure reasons (the metric's label and the JSON code).
const (
	reasonMissing   = "missing_token"
	reasonInvalid   = "invalid_token"
	reasonExpired   = "expired_token"
	reasonRevoked   = "revoked_token"
	reasonScope     = "insufficient_scope"
	reasonLimited   = "rate_limited"
	reasonCrossSite = "cross_origin"
)

// Defaults of Config.
const (
	DefaultFailuresPerMinute = 30
	DefaultSessionTTL        = 12 * time.Hour
	// touchEvery bounds last-used writes: one per token per minute, not one per request.
	touchEvery = time.Minute
	// maxClients bounds the failure limiter's memory under a spray from many addresses.
	maxClients = 10000
)

// Paths of the UI that the authenticator knows about.
const (
	LoginPath  = "/ui/login"
	LogoutPath = "/ui/logout"
	staticPath = "/ui/static/"
	// CookieName is the UI's session cookie.
	CookieName = "bookingledger_session"
)

// Config configures an Authenticator.
type Config struct {
	Store Store
	// Registry receives MetricFailures; nil registers nowhere.
	Registry prometheus.Registerer
	// Clock defaults to time.Now.
	Clock  func() time.Time
	Logger *slog.Logger
	// FailuresPerMinute is each client address's budget of failed attempts (burst of the same size);
	// past it every request of that address answers 429 until the budget refills. Zero: the default.
	FailuresPerMinute int
	// SessionTTL bounds a UI session (never past its token's expiry). Zero: the default.
	SessionTTL time.Duration
}

// Authenticator checks tokens and sessions and applies the scope policy. Safe for concurrent use.
type Authenticator struct {
	store      Store
	clock      func() time.Time
	log        *slog.Logger
	failures   *prometheus.CounterVec
	sessionTTL time.Duration
	csrf       *http.CrossOriginProtection

	limitMu sync.Mutex
	perMin  float64
	clients map[string]*bucket

	touchMu sync.Mutex
	touched map[string]time.Time

	// page, when set, writes refusals of browser requests (pageWanted) as pages (SetRefusalPage).
	page       RefusalPage
	pageWanted func(*http.Request) bool
}

// RefusalPage writes a refusal as a page: status, the JSON body's code and message.
type RefusalPage func(w http.ResponseWriter, r *http.Request, status int, code, msg string)

// SetRefusalPage makes the refusals of requests that wanted says want a page — a browser on the
// operator UI with its session — answer with page instead of the JSON error body (same status, code
// and message; the same headers and metrics). Call it before serving.
func (a *Authenticator) SetRefusalPage(wanted func(*http.Request) bool, page RefusalPage) {
	a.pageWanted, a.page = wanted, page
}

// refuse answers a refusal: the JSON error body, or the page for a browser.
func (a *Authenticator) refuse(w http.ResponseWriter, r *http.Request, status int, code, msg string, need Scope) {
	if a.page != nil && a.pageWanted != nil && a.pageWanted(r) {
		w.Header().Set("Cache-Control", "no-store")
		a.page(w, r, status, code, msg)
		return
	}
	writeError(w, status, code, msg, need)
}

// New builds an authenticator.
func New(cfg Config) (*Authenticator, error) {
	if cfg.Store == nil {
		return nil, errors.New("auth: no store")
	}
	if cfg.FailuresPerMinute < 0 || cfg.SessionTTL < 0 {
		return nil, errors.New("auth: negative limit")
	}
	a := &Authenticator{store: cfg.Store, clock: cfg.Clock, log: cfg.Logger, sessionTTL: cfg.SessionTTL,
		perMin: float64(cfg.FailuresPerMinute), clients: map[string]*bucket{}, touched: map[string]time.Time{}}
	if a.clock == nil {
		a.clock = time.Now
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.perMin == 0 {
		a.perMin = DefaultFailuresPerMinute
	}
	if a.sessionTTL == 0 {
		a.sessionTTL = DefaultSessionTTL
	}
	a.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricFailures,
		Help: "Requests to the admin surface (/api/, /ui/, /admin/, /metrics when protected) refused by reason: missing_token, invalid_token, expired_token, revoked_token, insufficient_scope, rate_limited, cross_origin.",
	}, []string{"reason"})
	for _, r := range []string{reasonMissing, reasonInvalid, reasonExpired, reasonRevoked, reasonScope, reasonLimited, reasonCrossSite} {
		a.failures.WithLabelValues(r)
	}
	if cfg.Registry != nil {
		if err := cfg.Registry.Register(a.failures); err != nil {
			return nil, fmt.Errorf("register auth metrics: %w", err)
		}
	}
	a.csrf = http.NewCrossOriginProtection()
	a.csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.failures.WithLabelValues(reasonCrossSite).Inc()
		a.refuse(w, r, http.StatusForbidden, reasonCrossSite, "cross-origin request refused (a form of this server must be posted from its own pages)", "")
	}))
	return a, nil
}

// Routes is the admin surface's route table. It has no ServeHTTP: the only way to serve it is
// Authenticator.Handler, so every route registered here is behind the policy.
type Routes struct {
	mux      *http.ServeMux
	patterns []string
}

// NewRoutes returns an empty route table.
func NewRoutes() *Routes { return &Routes{mux: http.NewServeMux()} }

// Handle registers h for pattern (http.ServeMux syntax).
func (rt *Routes) Handle(pattern string, h http.Handler) {
	rt.mux.Handle(pattern, h)
	rt.patterns = append(rt.patterns, pattern)
}

// HandleFunc registers f for pattern.
func (rt *Routes) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	rt.Handle(pattern, http.HandlerFunc(f))
}

// Patterns lists the registered patterns in registration order (tests enumerate them).
func (rt *Routes) Patterns() []string { return append([]string(nil), rt.patterns...) }

// Handler serves rt behind the policy.
func (a *Authenticator) Handler(rt *Routes) http.Handler { return a.Protect(rt.mux) }

// AdminPrefixes are the trees where every method needs admin, reading included: what is there
// (endpoints and their deliveries, job queues) is the operator's business, not a reader's.
var AdminPrefixes = []string{"/admin/", "/api/admin/", "/ui/admin/"}

// Required is the policy: the scope a request needs, or open for the few UI paths a browser must reach
// before it has signed in. Everything under AdminPrefixes needs admin whatever the method; otherwise
// GET and HEAD need read and every other method admin. There is deliberately no per-route exception.
func Required(r *http.Request) (need Scope, open bool) {
	p := r.URL.Path
	switch {
	case p == LoginPath || p == LogoutPath:
		return "", true
	case strings.HasPrefix(p, staticPath) && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		return "", true
	case underAdmin(p):
		return ScopeAdmin, false
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return ScopeRead, false
	}
	return ScopeAdmin, false
}

func underAdmin(p string) bool {
	for _, pre := range AdminPrefixes {
		if p+"/" == pre || strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

// browserPath: paths where a session cookie counts (the UI and the admin pages), never /api/.
func browserPath(p string) bool {
	return strings.HasPrefix(p, "/ui/") || p == "/admin" || strings.HasPrefix(p, "/admin/")
}

// Protect serves next behind cross-origin protection and the policy of Required.
func (a *Authenticator) Protect(next http.Handler) http.Handler {
	return a.csrf.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need, open := Required(r)
		if open {
			next.ServeHTTP(w, r)
			return
		}
		ip := clientAddr(r)
		if wait, ok := a.mayTry(ip); !ok {
			a.failures.WithLabelValues(reasonLimited).Inc()
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
			a.refuse(w, r, http.StatusTooManyRequests, reasonLimited, "too many failed attempts from this address; retry later", "")
			return
		}
		tok, err := a.authenticate(r)
		if err != nil {
			a.failed(ip)
			code, msg := failure(err)
			a.failures.WithLabelValues(code).Inc()
			if r.Header.Get("Authorization") == "" && browserPath(r.URL.Path) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
				http.Redirect(w, r, LoginPath+"?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="bookingledger", error="invalid_token", scope=%q`, need))
			a.refuse(w, r, http.StatusUnauthorized, code, msg+"; this request needs a token with the "+string(need)+" scope", need)
			return
		}
		if !tok.Scope.Allows(need) {
			a.failed(ip)
			a.failures.WithLabelValues(reasonScope).Inc()
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="bookingledger", error="insufficient_scope", scope=%q`, need))
			// The page knows who is signed in (the token is in its request's context, as for a page).
			a.refuse(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, tok)), http.StatusForbidden, reasonScope,
				fmt.Sprintf("token %q has the %s scope; %s %s needs the %s scope", tok.Name, tok.Scope, r.Method, r.URL.Path, need), need)
			return
		}
		a.touch(r.Context(), tok)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, tok)))
	}))
}

func failure(err error) (code, msg string) {
	switch {
	case errors.Is(err, errMissing):
		return reasonMissing, "no token (send Authorization: Bearer <token>)"
	case errors.Is(err, ErrExpired):
		return reasonExpired, "the token has expired"
	case errors.Is(err, ErrRevoked):
		return reasonRevoked, "the token was revoked"
	}
	return reasonInvalid, "the token is not valid"
}

var errMissing = errors.New("no credentials")

// authenticate finds the request's token: the bearer header, or on browser paths the session cookie.
func (a *Authenticator) authenticate(r *http.Request) (Token, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, v, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return Token{}, ErrInvalidToken
		}
		return a.Check(r.Context(), strings.TrimSpace(v))
	}
	if !browserPath(r.URL.Path) {
		return Token{}, errMissing
	}
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return Token{}, errMissing
	}
	s, tok, err := a.store.SessionToken(r.Context(), cookieHash(c.Value))
	switch {
	case errors.Is(err, ErrNotFound):
		return Token{}, ErrInvalidToken
	case err != nil:
		return Token{}, err
	case !a.clock().Before(s.ExpiresAt):
		return Token{}, ErrExpired
	}
	return tok, usable(tok, a.clock())
}

// Check validates a presented token string.
func (a *Authenticator) Check(ctx context.Context, presented string) (Token, error) {
	id, secret, ok := parseToken(presented)
	if !ok {
		secretMatches(presented, nil) // the same work as a well-formed miss
		return Token{}, ErrInvalidToken
	}
	tok, err := a.store.Token(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		secretMatches(secret, nil)
		return Token{}, ErrInvalidToken
	case err != nil:
		return Token{}, fmt.Errorf("look up token: %w", err)
	}
	if !secretMatches(secret, tok.SecretHash) {
		return Token{}, ErrInvalidToken
	}
	// Only the holder of the whole secret learns that it expired or was revoked.
	return tok, usable(tok, a.clock())
}

func usable(t Token, now time.Time) error {
	switch {
	case t.Revoked():
		return ErrRevoked
	case t.Expired(now):
		return ErrExpired
	}
	return nil
}

// touch records the token's use at most once a minute per token and process; a failure to write it is
// logged, never refused: it is bookkeeping, not access control.
func (a *Authenticator) touch(ctx context.Context, t Token) {
	now := a.clock()
	a.touchMu.Lock()
	last, seen := a.touched[t.ID]
	if !seen {
		last = t.LastUsedAt
	}
	due := now.Sub(last) >= touchEvery
	if due {
		a.touched[t.ID] = now
	}
	a.touchMu.Unlock()
	if !due {
		return
	}
	if err := a.store.TouchToken(ctx, t.ID, now); err != nil && ctx.Err() == nil {
		a.log.Warn("could not record a token's last use", "token", t.ID, "error", err.Error())
	}
}

type ctxKey struct{}

// FromContext returns the token a request was authenticated with.
func FromContext(ctx context.Context) (Token, bool) {
	t, ok := ctx.Value(ctxKey{}).(Token)
	return t, ok
}

// Actor names who made the request: its token's name ("" outside Protect).
func Actor(r *http.Request) string {
	t, _ := FromContext(r.Context())
	return t.Name
}

// SignIn checks a token typed into the sign-in page and starts a session for it: the cookie holds a
// random value whose hash is stored with the token's id. A failed attempt counts against the client's
// budget like a failed request.
func (a *Authenticator) SignIn(w http.ResponseWriter, r *http.Request, presented string) (Token, error) {
	ip := clientAddr(r)
	if _, ok := a.mayTry(ip); !ok {
		a.failures.WithLabelValues(reasonLimited).Inc()
		return Token{}, ErrRateLimited
	}
	tok, err := a.Check(r.Context(), strings.TrimSpace(presented))
	if err != nil {
		a.failed(ip)
		code, _ := failure(err)
		a.failures.WithLabelValues(code).Inc()
		return Token{}, err
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	value := base64.RawURLEncoding.EncodeToString(raw[:])
	now := a.clock()
	s := Session{Hash: cookieHash(value), TokenID: tok.ID, CreatedAt: now, ExpiresAt: now.Add(a.sessionTTL)}
	if !tok.ExpiresAt.IsZero() && tok.ExpiresAt.Before(s.ExpiresAt) {
		s.ExpiresAt = tok.ExpiresAt
	}
	if err := a.store.CreateSession(r.Context(), s); err != nil {
		return Token{}, fmt.Errorf("start session: %w", err)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: "/", Expires: s.ExpiresAt,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return tok, nil
}

// ErrRateLimited: the client used up its budget of failed attempts.
var ErrRateLimited = errors.New("too many failed attempts; retry later")

// SignOut ends the request's session (if any) and clears its cookie.
func (a *Authenticator) SignOut(w http.ResponseWriter, r *http.Request) error {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	if err := a.store.DeleteSession(r.Context(), cookieHash(c.Value)); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

func cookieHash(v string) []byte {
	h := sha256.Sum256([]byte("session:" + v))
	return h[:]
}

// clientAddr is the peer's IP. X-Forwarded-For is not trusted: a proxy in front would make every
// client one address, which is documented (docs/operations/ui-and-tokens.md).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// bucket is one client's budget of failures.
type bucket struct {
	tokens float64
	last   time.Time
}

func (a *Authenticator) refill(b *bucket, now time.Time) {
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(a.perMin, b.tokens+el*a.perMin/60)
		b.last = now
	}
}

// mayTry reports whether ip has budget left, and otherwise how long until it has.
func (a *Authenticator) mayTry(ip string) (time.Duration, bool) {
	a.limitMu.Lock()
	defer a.limitMu.Unlock()
	b, ok := a.clients[ip]
	if !ok {
		return 0, true
	}
	a.refill(b, a.clock())
	if b.tokens >= 1 {
		return 0, true
	}
	return time.Duration((1 - b.tokens) * 60 / a.perMin * float64(time.Second)), false
}

// failed spends one unit of ip's budget.
func (a *Authenticator) failed(ip string) {
	now := a.clock()
	a.limitMu.Lock()
	defer a.limitMu.Unlock()
	b, ok := a.clients[ip]
	if !ok {
		if len(a.clients) >= maxClients {
			for k, v := range a.clients { // forget clients whose budget is whole again
				if a.refill(v, now); v.tokens >= a.perMin {
					delete(a.clients, k)
				}
			}
			for k := range a.clients { // still full: drop any, a spray must not grow memory
				if len(a.clients) < maxClients {
					break
				}
				delete(a.clients, k)
			}
		}
		b = &bucket{tokens: a.perMin, last: now}
		a.clients[ip] = b
	}
	a.refill(b, now)
	b.tokens = max(b.tokens-1, 0)
}

// ErrorBody is the JSON body of every refusal: the project's {error, code}, and the scope needed.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Scope Scope  `json:"required_scope,omitempty"`
}

func writeError(w http.ResponseWriter, status int, code, msg string, need Scope) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // the messages show <token>; nothing here is rendered as HTML
	_ = enc.Encode(ErrorBody{Error: msg, Code: code, Scope: need})
}
