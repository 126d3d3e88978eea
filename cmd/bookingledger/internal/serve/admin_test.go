package serve

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi/auth"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/jobs/jobstest"
	"bookingledger/adapters/metricstest"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/postgres/tokens"
	"bookingledger/adapters/privacy"
	"bookingledger/adapters/relay"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/domain/resource"
)

// adminFixture is the server's admin surface over a fresh database, with a token of every kind.
type adminFixture struct {
	srv    *httptest.Server
	adm    *admin
	routes []string
	reg    *prometheus.Registry
	store  *tokens.Store
	tok    map[string]string // kind -> presented token
	pool   *pgxpool.Pool
	relay  *relay.Relay
}

func newAdminFixture(t *testing.T, failuresPerMinute int) *adminFixture {
	t.Helper()
	pool := pgtest.NewDatabaseWith(t, jobstest.Template) // River's tables from the template: the Migrate below is a no-op
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, err := jobs.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{}) // insert-only: what River's UI reads through
	require.NoError(t, err)
	store := postgres.NewStore(pool)
	rm := readmodel.New(pool, store, eventcodec.JSON{}, readmodel.Options{Receipts: store})
	reg := prometheus.NewRegistry()
	rl, err := relay.New(relay.Config{Pool: pool, Events: store})
	require.NoError(t, err)
	// Every optional part of the surface is on, so the route table is serve's whole table.
	adm, err := newAdmin(ctx, adminDeps{pool: pool, rm: rm, steps: stepstore.NewStore(pool, client), relay: rl, receipts: store, jobs: client, providers: []string{"calendly"},
		links: resource.NewService(store, eventcodec.JSON{}), eraser: privacy.NewEraser(pool, nil, ledgerdb.ErasureOwners(pool)),
		log: slog.New(slog.DiscardHandler), reg: reg, failuresPerMinute: failuresPerMinute})
	require.NoError(t, err)
	f := &adminFixture{adm: adm, routes: adm.routes.Patterns(), reg: reg, store: tokens.New(pool), tok: map[string]string{}, pool: pool, relay: rl}
	f.srv = httptest.NewServer(adm.authn.Handler(adm.routes))
	t.Cleanup(f.srv.Close)

	now := time.Now()
	mk := func(kind string, scope auth.Scope, created time.Time, ttl time.Duration) auth.Token {
		secret, tk, err := auth.NewToken("t-"+kind, scope, created, ttl)
		require.NoError(t, err)
		require.NoError(t, f.store.Create(ctx, tk))
		f.tok[kind] = secret
		return tk
	}
	mk("admin", auth.ScopeAdmin, now, 0)
	mk("read", auth.ScopeRead, now, 24*time.Hour)
	mk("expired", auth.ScopeAdmin, now.Add(-2*time.Hour), time.Hour)
	revoked := mk("revoked", auth.ScopeAdmin, now, 0)
	_, err = f.store.Revoke(ctx, revoked.ID, now)
	require.NoError(t, err)
	// Well-formed but never issued; and the admin token with its secret altered in the last character.
	unknown, _, err := auth.NewToken("never-stored", auth.ScopeAdmin, now, 0)
	require.NoError(t, err)
	f.tok["unknown"] = unknown
	a := f.tok["admin"]
	last := "A"
	if strings.HasSuffix(a, "A") {
		last = "B"
	}
	f.tok["wrong secret"] = a[:len(a)-1] + last
	f.tok["garbage"] = "not-a-token"
	return f
}

// requestsOf turns a registered pattern into concrete requests: its method (GET and POST when the
// pattern has none) and its path with every wildcard filled in.
func requestsOf(pattern string) (methods []string, path string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		path, method = pattern, ""
	}
	path = wildcard.ReplaceAllString(strings.ReplaceAll(path, "{$}", ""), "1")
	if method == "" {
		return []string{http.MethodGet, http.MethodPost}, path
	}
	if method == http.MethodGet {
		return []string{http.MethodGet, http.MethodHead}, path
	}
	return []string{method}, path
}

// noRedirects shows a redirect as it is answered (the UI sends browsers without a session to sign in).
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (f *adminFixture) do(t *testing.T, method, path, token string) (int, auth.ErrorBody, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(`{"note":"route table test"}`))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := noRedirects.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var body auth.ErrorBody
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests {
		if method != http.MethodHead {
			require.NoError(t, json.Unmarshal(raw, &body), "refusals carry the JSON error body: %s", raw)
		}
	}
	return resp.StatusCode, body, resp.Header
}

// TestEveryAdminRouteNeedsAToken is generated from the server's own route table: a route added to the
// admin surface is in it, so it cannot be left open.
func TestEveryAdminRouteNeedsAToken(t *testing.T) {
	f := newAdminFixture(t, 1<<20)
	var api, mutations int
	for _, p := range f.routes {
		if strings.Contains(p, " /api/") {
			api++
		}
		if m, _, _ := strings.Cut(p, " "); m != http.MethodGet && m != http.MethodHead {
			mutations++
		}
	}
	require.GreaterOrEqual(t, api, 5, "the read API's routes are registered: %v", f.routes)
	require.True(t, slices.Contains(f.routes, "GET /api/admin/endpoints"), "the relay's routes are registered: %v", f.routes)
	for _, p := range f.routes {
		_, path, _ := strings.Cut(p, " ")
		if path == "" {
			path = p
		}
		assert.True(t, slices.ContainsFunc(adminPrefixes, func(pre string) bool { return strings.HasPrefix(path, pre) }),
			"%s is under an admin prefix, so adminRoutes serves it", p)
	}
	require.GreaterOrEqual(t, mutations, 1, "at least one mutation is covered")

	refused := []struct {
		kind, code string
	}{
		{"", "missing_token"}, {"garbage", "invalid_token"}, {"unknown", "invalid_token"}, {"wrong secret", "invalid_token"},
		{"expired", "expired_token"}, {"revoked", "revoked_token"},
	}
	for _, pattern := range f.routes {
		methods, path := requestsOf(pattern)
		for _, method := range methods {
			need, open := auth.Required(httptest.NewRequest(method, path, nil))
			if open {
				continue // the sign-in page and static files, listed in auth.Required
			}
			if strings.HasPrefix(path, "/api/admin/") || strings.HasPrefix(path, "/ui/admin/") || strings.HasPrefix(path, "/admin/") {
				require.Equal(t, auth.ScopeAdmin, need, "%s %s: everything under an admin tree needs admin, reading too", method, path)
			}
			t.Run(pattern+" "+method, func(t *testing.T) {
				for _, c := range refused {
					status, body, hdr := f.do(t, method, path, f.tok[c.kind])
					if strings.HasPrefix(path, "/ui/") || strings.HasPrefix(path, "/admin/") {
						if c.kind == "" && (method == http.MethodGet || method == http.MethodHead) {
							assert.Equal(t, http.StatusSeeOther, status, "a browser without a session is sent to sign in")
							continue
						}
					}
					require.Equal(t, http.StatusUnauthorized, status, "token %q", c.kind)
					if method != http.MethodHead {
						assert.Equal(t, c.code, body.Code, "token %q", c.kind)
						assert.Equal(t, need, body.Scope, "the answer names the scope needed")
						assert.Contains(t, body.Error, string(need)+" scope")
					}
					assert.Contains(t, hdr.Get("WWW-Authenticate"), `scope="`+string(need)+`"`)
				}
				status, body, _ := f.do(t, method, path, f.tok["read"])
				if need == auth.ScopeAdmin {
					require.Equal(t, http.StatusForbidden, status, "a read token may not %s %s", method, path)
					if method != http.MethodHead {
						assert.Equal(t, "insufficient_scope", body.Code)
						assert.Equal(t, auth.ScopeAdmin, body.Scope)
					}
				} else {
					assert.NotContains(t, []int{401, 403}, status, "a read token may %s %s", method, path)
				}
				status, _, _ = f.do(t, method, path, f.tok["admin"])
				assert.NotContains(t, []int{401, 403}, status, "an admin token may %s %s", method, path)
			})
		}
	}
	assert.Positive(t, failures(t, f.reg, "missing_token"))
	assert.Positive(t, failures(t, f.reg, "insufficient_scope"))
	assert.Positive(t, failures(t, f.reg, "revoked_token"))
}

func failures(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return metricstest.Sum(t, reg, auth.MetricFailures, map[string]string{"reason": reason})
}

func TestFailedAttemptsAreRateLimitedPerAddress(t *testing.T) {
	f := newAdminFixture(t, 5)
	for i := range 5 {
		status, _, _ := f.do(t, http.MethodGet, "/api/reconciliation", f.tok["unknown"])
		require.Equal(t, http.StatusUnauthorized, status, "attempt %d", i+1)
	}
	status, body, hdr := f.do(t, http.MethodGet, "/api/reconciliation", f.tok["unknown"])
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.Equal(t, "rate_limited", body.Code)
	assert.NotEmpty(t, hdr.Get("Retry-After"))
	status, _, _ = f.do(t, http.MethodGet, "/api/reconciliation", f.tok["admin"])
	assert.Equal(t, http.StatusTooManyRequests, status, "the address is limited whatever it presents next, so guessing stays slow")
	assert.Equal(t, 5.0, failures(t, f.reg, "invalid_token"))
	assert.Equal(t, 2.0, failures(t, f.reg, "rate_limited"))
}

// signIn posts a token to the sign-in form and returns the session cookie.
func (f *adminFixture) signIn(t *testing.T, token, next string) (*http.Cookie, *http.Response) {
	t.Helper()
	resp, err := noRedirects.PostForm(f.srv.URL+auth.LoginPath, url.Values{"token": {token}, "next": {next}})
	require.NoError(t, err)
	defer resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == auth.CookieName {
			return c, resp
		}
	}
	return nil, resp
}

func (f *adminFixture) page(t *testing.T, method, path string, c *http.Cookie, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c != nil {
		req.AddCookie(c)
	}
	resp, err := noRedirects.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestUIPagesByScope(t *testing.T) {
	f := newAdminFixture(t, 1<<20)
	status, js := f.page(t, http.MethodGet, "/ui/static/htmx.min.js", nil, nil)
	require.Equal(t, http.StatusOK, status, "static files are served before sign-in")
	assert.Contains(t, js, "htmx")

	_, resp := f.signIn(t, f.tok["revoked"], "")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a revoked token does not sign in")

	// next must stay on this server's pages: an absolute or protocol-relative URL is replaced.
	for next, want := range map[string]string{"/ui/deliveries?provider=calendly": "/ui/deliveries?provider=calendly",
		"https://evil.example/": "/ui/calendar", "//evil.example/ui/": "/ui/calendar", "/api/calendar": "/ui/calendar"} {
		_, resp := f.signIn(t, f.tok["read"], next)
		assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
		assert.Equal(t, want, resp.Header.Get("Location"), next)
	}

	read, _ := f.signIn(t, f.tok["read"], "")
	require.NotNil(t, read)
	status, body := f.page(t, http.MethodGet, "/ui/reconciliation", read, nil)
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "Resolving needs an admin token")
	assert.NotContains(t, body, `class="resolve"`, "no resolve form for a read token")
	assert.NotContains(t, body, `href="/admin/jobs/"`, "no link to River's UI for a read token")
	status, _ = f.page(t, http.MethodPost, "/ui/reconciliation/1/resolve", read, url.Values{"note": {"x"}})
	assert.Equal(t, http.StatusForbidden, status, "resolving needs admin")
	status, _ = f.page(t, http.MethodGet, "/admin/jobs/", read, nil)
	assert.Equal(t, http.StatusForbidden, status, "River's UI needs admin")

	for path, want := range map[string]int{"/ui/calendar?date=yesterday": 400, "/ui/calendar?view=month": 400,
		"/ui/bookings/calendly-nobody": 404, "/ui/bookings/has%20space": 400, "/ui/deliveries?outcome=lost": 400,
		"/ui/deliveries?provider=nope": 400, "/ui/calendar?date=2026-12-01&view=day": 200, "/ui/deliveries": 200, "/ui/": 303,
		"/ui/search?q=nobody": 200, "/ui/search?q=" + strings.Repeat("x", 201): 400, "/ui/calendar?week=2026-12-03": 200,
		"/ui/calendar?week=monday": 400, "/ui/timezone?tz=Europe/Berlin&next=/ui/calendar": 303, "/ui/timezone?tz=Nowhere": 400,
		"/ui/nowhere": 404} {
		status, body := f.page(t, http.MethodGet, path, read, nil)
		assert.Equal(t, want, status, "%s: %s", path, body)
	}

	admin, _ := f.signIn(t, f.tok["admin"], "")
	status, _ = f.page(t, http.MethodGet, "/admin/jobs/", admin, nil)
	assert.Equal(t, http.StatusOK, status)
	status, body = f.page(t, http.MethodPost, "/ui/reconciliation/999/resolve", admin, url.Values{"note": {"x"}})
	assert.Equal(t, http.StatusNotFound, status, body)
}

// TestRelayPagesAnswerBadInputWithItsStatus: the endpoints pages say what is wrong with a request
// (400 for a malformed id, state, window or type filter; 404 for what does not exist), and a read
// token gets none of them.
func TestRelayPagesAnswerBadInputWithItsStatus(t *testing.T) {
	f := newAdminFixture(t, 1<<20)
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/ui/admin/endpoints", http.StatusOK},
		{"GET", "/ui/admin/endpoints/x", http.StatusBadRequest},
		{"GET", "/ui/admin/endpoints/1?state=lost", http.StatusBadRequest},
		{"GET", "/ui/admin/endpoints/9", http.StatusNotFound},
		{"GET", "/ui/admin/endpoints/9/replay?from=2026-12-01T00:00&to=2026-12-02T00:00", http.StatusNotFound},
		{"GET", "/ui/admin/endpoints/9/replay?from=yesterday&to=2026-12-02T00:00", http.StatusBadRequest},
		{"GET", "/ui/admin/endpoints/9/replay?from=2026-12-02T00:00&to=2026-12-01T00:00", http.StatusBadRequest},
		{"GET", "/ui/admin/endpoints/9/replay?from=2026-12-01T00:00&to=2026-12-02T00:00&types=Bad%20Type", http.StatusBadRequest},
		{"POST", "/ui/admin/deliveries/9/retry", http.StatusNotFound},
		{"POST", "/ui/admin/endpoints/9/enable", http.StatusNotFound},
		{"POST", "/ui/admin/endpoints/x/enable", http.StatusBadRequest},
		{"POST", "/ui/admin/deliveries/0/retry", http.StatusBadRequest},
		{"GET", "/ui/admin/replays/9", http.StatusNotFound},
	} {
		status, _, _ := f.do(t, c.method, c.path, f.tok["admin"])
		assert.Equal(t, c.status, status, "%s %s", c.method, c.path)
		status, _, _ = f.do(t, c.method, c.path, f.tok["read"])
		assert.Equal(t, http.StatusForbidden, status, "a read token: %s %s", c.method, c.path)
	}
}
