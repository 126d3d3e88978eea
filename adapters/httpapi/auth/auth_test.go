package auth_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/auth"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/tokens"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestMain drops the package's spare databases once its tests have run.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := spares.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = cmp.Or(code, 1)
	}
	os.Exit(code)
}

// spares are the package's test databases (see pgtest.Spares): a test that passed gives its database
// back emptied, with its pool's warm connections, to the next.
var spares pgtest.Spares

type env struct {
	pool  *pgxpool.Pool
	store *tokens.Store
	authn *auth.Authenticator
	clock *clock
	srv   http.Handler
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvLimited(t, 1000)
}

// newEnvLimited is newEnv with a budget of failuresPerMinute (0: the default) and sessions of an hour.
func newEnvLimited(t *testing.T, failuresPerMinute int) *env {
	t.Helper()
	pool := spares.Database(t)
	e := &env{pool: pool, store: tokens.New(pool), clock: &clock{now: time.Date(2027, 3, 15, 10, 0, 0, 0, time.UTC)}}
	a, err := auth.New(auth.Config{Store: e.store, Clock: e.clock.Now, FailuresPerMinute: failuresPerMinute, SessionTTL: time.Hour})
	require.NoError(t, err)
	e.authn = a
	rt := auth.NewRoutes()
	ok := func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello " + auth.Actor(r))) }
	rt.HandleFunc("GET /api/thing", ok)
	rt.HandleFunc("GET /ui/page", ok)
	rt.HandleFunc("POST /ui/act", ok)
	rt.HandleFunc("/admin/jobs/", ok)
	rt.HandleFunc("POST "+auth.LoginPath, func(w http.ResponseWriter, r *http.Request) {
		if _, err := a.SignIn(w, r, r.FormValue("token")); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
		}
	})
	rt.HandleFunc("POST "+auth.LogoutPath, func(w http.ResponseWriter, r *http.Request) { require.NoError(t, a.SignOut(w, r)) })
	e.srv = a.Handler(rt)
	return e
}

func (e *env) token(t *testing.T, name string, scope auth.Scope, ttl time.Duration) (string, auth.Token) {
	t.Helper()
	secret, tk, err := auth.NewToken(name, scope, e.clock.Now(), ttl)
	require.NoError(t, err)
	require.NoError(t, e.store.Create(context.Background(), tk))
	return secret, tk
}

func (e *env) do(method, path string, mod func(r *http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	if mod != nil {
		mod(r)
	}
	w := httptest.NewRecorder()
	e.srv.ServeHTTP(w, r)
	return w
}

func bearer(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

func TestTokensExpireAndRecordTheirUseAtMostOnceAMinute(t *testing.T) {
	e := newEnv(t)
	secret, tk := e.token(t, "auditor", auth.ScopeRead, 2*time.Hour)
	w := e.do("GET", "/api/thing", bearer(secret))
	require.Equal(t, 200, w.Code, w.Body.String())
	assert.Equal(t, "hello auditor", w.Body.String(), "the handler sees who called")

	used := func() time.Time {
		got, err := e.store.Token(context.Background(), tk.ID)
		require.NoError(t, err)
		return got.LastUsedAt
	}
	first := used()
	assert.True(t, first.Equal(e.clock.Now()), "last use recorded: %v", first)
	e.clock.add(30 * time.Second)
	require.Equal(t, 200, e.do("GET", "/api/thing", bearer(secret)).Code)
	assert.True(t, used().Equal(first), "not rewritten within a minute")
	e.clock.add(31 * time.Second)
	require.Equal(t, 200, e.do("GET", "/api/thing", bearer(secret)).Code)
	assert.True(t, used().Equal(e.clock.Now()), "rewritten after a minute")

	e.clock.add(2 * time.Hour)
	w = e.do("GET", "/api/thing", bearer(secret))
	assert.Equal(t, 401, w.Code)
	assert.Contains(t, w.Body.String(), `"code":"expired_token"`)
	assert.Contains(t, w.Body.String(), `"required_scope":"read"`)

	w = e.do("GET", "/api/thing", func(r *http.Request) { r.Header.Set("Authorization", "Basic "+secret) })
	assert.Equal(t, 401, w.Code, "only the Bearer scheme")
}

func TestSessionsAreBrowserOnlyBoundToTheTokenAndCrossOriginPostsRefused(t *testing.T) {
	e := newEnv(t)
	secret, tk := e.token(t, "front-desk", auth.ScopeAdmin, 0)

	// A wrong token does not sign in.
	w := e.do("POST", auth.LoginPath, func(r *http.Request) {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Body = ioNopCloser("token=blt_nope")
	})
	assert.Equal(t, 401, w.Code)
	assert.Empty(t, w.Result().Cookies())

	w = e.do("POST", auth.LoginPath, func(r *http.Request) {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Body = ioNopCloser("token=" + secret)
	})
	require.Equal(t, 200, w.Code, w.Body.String())
	cookies := w.Result().Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	assert.Equal(t, auth.CookieName, c.Name)
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
	assert.NotContains(t, c.Value, secret[16:], "the cookie is not the token")
	withCookie := func(r *http.Request) { r.AddCookie(c) }

	w = e.do("GET", "/ui/page", withCookie)
	assert.Equal(t, 200, w.Code)
	assert.Equal(t, "hello front-desk", w.Body.String())
	assert.Equal(t, 200, e.do("GET", "/admin/jobs/", withCookie).Code)
	assert.Equal(t, 401, e.do("GET", "/api/thing", withCookie).Code, "the API takes bearer tokens only, never the cookie")
	assert.Equal(t, 200, e.do("POST", "/ui/act", func(r *http.Request) {
		withCookie(r)
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	}).Code)
	w = e.do("POST", "/ui/act", func(r *http.Request) {
		withCookie(r)
		r.Header.Set("Sec-Fetch-Site", "cross-site")
	})
	assert.Equal(t, 403, w.Code, "a cross-origin form post is refused")
	assert.Contains(t, w.Body.String(), `"code":"cross_origin"`)
	w = e.do("POST", "/ui/act", func(r *http.Request) {
		withCookie(r)
		r.Header.Set("Origin", "https://evil.example")
		r.Host = "bookingledger.example"
	})
	assert.Equal(t, 403, w.Code, "an Origin of another host is refused too")

	w = e.do("GET", "/ui/page", nil)
	assert.Equal(t, http.StatusSeeOther, w.Code, "no session: sent to sign in")
	assert.Equal(t, auth.LoginPath+"?next=%2Fui%2Fpage", w.Header().Get("Location"))

	_, err := e.store.Revoke(context.Background(), tk.Name, e.clock.Now())
	require.NoError(t, err)
	assert.Equal(t, http.StatusSeeOther, e.do("GET", "/ui/page", withCookie).Code, "revoking the token ends its sessions")

	// Sign in again, sign out: the cookie no longer works even if a browser kept it.
	secret2, _ := e.token(t, "front-desk", auth.ScopeRead, 0)
	w = e.do("POST", auth.LoginPath, func(r *http.Request) {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Body = ioNopCloser("token=" + secret2)
	})
	require.Equal(t, 200, w.Code)
	c2 := w.Result().Cookies()[0]
	assert.Equal(t, 403, e.do("GET", "/admin/jobs/", func(r *http.Request) { r.AddCookie(c2) }).Code, "River's UI is admin only, also for GET")
	w = e.do("POST", auth.LogoutPath, func(r *http.Request) { r.AddCookie(c2) })
	require.Equal(t, 200, w.Code)
	assert.Equal(t, -1, w.Result().Cookies()[0].MaxAge, "the cookie is cleared")
	assert.Equal(t, http.StatusSeeOther, e.do("GET", "/ui/page", func(r *http.Request) { r.AddCookie(c2) }).Code)

	// The session ends with its lifetime.
	w = e.do("POST", auth.LoginPath, func(r *http.Request) {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Body = ioNopCloser("token=" + secret2)
	})
	c3 := w.Result().Cookies()[0]
	e.clock.add(61 * time.Minute)
	assert.Equal(t, http.StatusSeeOther, e.do("GET", "/ui/page", func(r *http.Request) { r.AddCookie(c3) }).Code)
}

func TestTokenFormatAndLifetimes(t *testing.T) {
	now := time.Now()
	s, tk, err := auth.NewToken("ci", auth.ScopeAdmin, now, 0)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(s, "blt_"+tk.ID+"_"))
	assert.Len(t, tk.SecretHash, 32)
	assert.True(t, tk.ExpiresAt.IsZero())
	s2, _, err := auth.NewToken("ci", auth.ScopeAdmin, now, 0)
	require.NoError(t, err)
	assert.NotEqual(t, s, s2)
	for _, bad := range []string{"", strings.Repeat("x", 65), "tab\tname"} {
		_, _, err := auth.NewToken(bad, auth.ScopeRead, now, 0)
		assert.ErrorIs(t, err, auth.ErrInvalidToken, "%q", bad)
	}
	_, _, err = auth.NewToken("x", "write", now, 0)
	assert.ErrorIs(t, err, auth.ErrInvalidToken)

	for in, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "1d": 24 * time.Hour, "36h": 36 * time.Hour} {
		got, err := auth.ParseLifetime(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"0d", "-1d", "d", "1.5d", "forever", "-3h", "01d"} {
		_, err := auth.ParseLifetime(bad)
		assert.Error(t, err, bad)
	}
	assert.True(t, auth.ScopeAdmin.Allows(auth.ScopeRead))
	assert.False(t, auth.ScopeRead.Allows(auth.ScopeAdmin))

	// A lifetime ends at its instant: the token is expired from then on, not one tick later.
	_, limited, err := auth.NewToken("ci-short", auth.ScopeRead, now, time.Hour)
	require.NoError(t, err)
	assert.False(t, limited.Expired(limited.ExpiresAt.Add(-time.Nanosecond)))
	assert.True(t, limited.Expired(limited.ExpiresAt))
	assert.False(t, tk.Expired(now.AddDate(100, 0, 0)), "a token without a lifetime never expires")
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

func ioNopCloser(s string) nopCloser { return nopCloser{strings.NewReader(s)} }

// Concurrent requests share the limiter and the last-use bookkeeping (run under -race): every good one
// passes, the bad client's failures are limited across goroutines. Only failures spend the budget, so
// attempts already in flight when it runs out still get their 401 (at most the concurrency of that
// moment); every later one gets 429.
func TestConcurrentRequestsShareOneBudget(t *testing.T) {
	e := &env{store: tokens.New(spares.Database(t)), clock: &clock{now: time.Date(2027, 3, 15, 10, 0, 0, 0, time.UTC)}}
	a, err := auth.New(auth.Config{Store: e.store, Clock: e.clock.Now, FailuresPerMinute: 10})
	require.NoError(t, err)
	rt := auth.NewRoutes()
	rt.HandleFunc("GET /api/thing", func(w http.ResponseWriter, _ *http.Request) {})
	e.srv = a.Handler(rt)
	good, _ := e.token(t, "script", auth.ScopeRead, 0)
	var wg sync.WaitGroup
	codes := make([]int, 40)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := httptest.NewRequest("GET", "/api/thing", nil)
			r.RemoteAddr = "192.0.2.7:1234"
			if i%2 == 0 {
				r.RemoteAddr = "192.0.2.8:1234" // another client: its own budget
				r.Header.Set("Authorization", "Bearer "+good)
			} else {
				r.Header.Set("Authorization", "Bearer blt_000000000000_nope")
			}
			w := httptest.NewRecorder()
			e.srv.ServeHTTP(w, r)
			codes[i] = w.Code
		}()
	}
	wg.Wait()
	var ok, unauthorized, limited int
	for _, c := range codes {
		switch c {
		case 200:
			ok++
		case 401:
			unauthorized++
		case 429:
			limited++
		}
	}
	assert.Equal(t, 20, ok, "the good client is not limited by the bad one")
	assert.GreaterOrEqual(t, unauthorized, 10, "the bad client's budget")
	assert.Equal(t, 20, unauthorized+limited)
	r := httptest.NewRequest("GET", "/api/thing", nil)
	r.RemoteAddr = "192.0.2.7:1234"
	r.Header.Set("Authorization", "Bearer "+good)
	w := httptest.NewRecorder()
	e.srv.ServeHTTP(w, r)
	assert.Equal(t, http.StatusTooManyRequests, w.Code, "the bad client's budget is spent, whatever it presents next")
}

// TestRequiredScope: reading needs read, except under the admin trees, where every method needs admin
// (a read token lists no relay endpoints, neither through the API nor the UI).
func TestRequiredScope(t *testing.T) {
	for _, c := range []struct {
		method, path string
		need         auth.Scope
		open         bool
	}{
		{"GET", "/api/calendar", auth.ScopeRead, false},
		{"HEAD", "/api/bookings/x/history", auth.ScopeRead, false},
		{"POST", "/api/reconciliation/1/resolve", auth.ScopeAdmin, false},
		{"GET", "/api/admin/endpoints", auth.ScopeAdmin, false},
		{"HEAD", "/api/admin/deliveries/1", auth.ScopeAdmin, false},
		{"GET", "/api/admin", auth.ScopeAdmin, false},
		{"GET", "/api/administrator", auth.ScopeRead, false},
		{"GET", "/ui/calendar", auth.ScopeRead, false},
		{"GET", "/ui/admin/endpoints", auth.ScopeAdmin, false},
		{"GET", "/admin/jobs/", auth.ScopeAdmin, false},
		{"GET", "/admin", auth.ScopeAdmin, false},
		{"GET", auth.LoginPath, "", true},
		{"GET", "/ui/static/style.css", "", true},
		{"POST", "/ui/static/style.css", auth.ScopeAdmin, false},
	} {
		need, open := auth.Required(httptest.NewRequest(c.method, c.path, nil))
		assert.Equal(t, c.need, need, "%s %s", c.method, c.path)
		assert.Equal(t, c.open, open, "%s %s", c.method, c.path)
	}
}

// TestRefusalsOfABrowserArePages: with a refusal page set, the refusals of requests it wants (here:
// those accepting HTML) are the page, with the same status, code and message, the signed-in token
// known to it; the others keep the JSON body.
func TestRefusalsOfABrowserArePages(t *testing.T) {
	e := newEnv(t)
	secret, _ := e.token(t, "desk", auth.ScopeRead, 0)
	e.authn.SetRefusalPage(func(r *http.Request) bool { return strings.Contains(r.Header.Get("Accept"), "text/html") },
		func(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
			who := "nobody"
			if tok, ok := auth.FromContext(r.Context()); ok {
				who = tok.Name
			}
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			_, _ = w.Write([]byte("<p>" + code + " for " + who + ": " + msg + "</p>"))
		})
	html := func(r *http.Request) { bearer(secret)(r); r.Header.Set("Accept", "text/html") }
	w := e.do("GET", "/admin/jobs/", html)
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Equal(t, "text/html", w.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	assert.Contains(t, w.Header().Get("WWW-Authenticate"), `error="insufficient_scope"`)
	assert.Equal(t, `<p>insufficient_scope for desk: token "desk" has the read scope; GET /admin/jobs/ needs the admin scope</p>`, w.Body.String())

	w = e.do("POST", "/ui/act", func(r *http.Request) {
		r.Header.Set("Accept", "text/html")
		r.Header.Set("Sec-Fetch-Site", "cross-site")
	})
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Contains(t, w.Body.String(), "cross_origin for nobody")

	w = e.do("GET", "/admin/jobs/", bearer(secret))
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"), "not wanted: JSON as before")
	assert.Contains(t, w.Body.String(), `"code":"insufficient_scope"`)
}
