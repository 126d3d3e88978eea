package auth_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/auth"
)

// signIn posts presented to the sign-in form (over TLS when tlsOn) and returns the answer.
func (e *env) signIn(presented string, tlsOn bool) *httptest.ResponseRecorder {
	return e.do("POST", auth.LoginPath, func(r *http.Request) {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Body = ioNopCloser("token=" + presented)
		if tlsOn {
			r.TLS = &tls.ConnectionState{}
		}
	})
}

// The bearer scheme is case-insensitive (RFC 9110) and spaces around the token do not count; a token
// whose separator is altered is not the token; a wrong secret learns nothing about the token's state
// (expired or revoked is said only to the holder of the whole secret).
func TestBearerParsingAndWhatAWrongSecretLearns(t *testing.T) {
	e := newEnv(t)
	secret, _ := e.token(t, "script", auth.ScopeRead, 0)
	for _, h := range []string{"bearer " + secret, "BEARER  " + secret + " "} {
		w := e.do("GET", "/api/thing", func(r *http.Request) { r.Header.Set("Authorization", h) })
		assert.Equal(t, 200, w.Code, "%q: %s", h, w.Body.String())
	}
	w := e.do("GET", "/api/thing", bearer(secret[:16]+"-"+secret[17:]))
	assert.Equal(t, 401, w.Code)
	assert.Contains(t, w.Body.String(), `"code":"invalid_token"`)
	w = e.do("GET", "/ui/page", bearer("blt_nope"))
	assert.Equal(t, 401, w.Code, "a bad bearer token on a page is answered, not sent to sign in")

	expired, _ := e.token(t, "short", auth.ScopeRead, time.Minute)
	revoked, rt := e.token(t, "gone", auth.ScopeRead, 0)
	_, err := e.store.Revoke(context.Background(), rt.ID, e.clock.Now())
	require.NoError(t, err)
	e.clock.add(time.Hour)
	for tok, code := range map[string]string{expired: "expired_token", revoked: "revoked_token"} {
		w := e.do("GET", "/api/thing", bearer(tok))
		assert.Contains(t, w.Body.String(), `"code":"`+code+`"`)
		last := "A"
		if strings.HasSuffix(tok, "A") {
			last = "B"
		}
		w = e.do("GET", "/api/thing", bearer(tok[:len(tok)-1]+last))
		assert.Equal(t, 401, w.Code)
		assert.Contains(t, w.Body.String(), `"code":"invalid_token"`, "a wrong secret of a %s token", code)
	}
}

// Each address may fail FailuresPerMinute times as a burst, refilled at that rate and never past the
// burst however long it waited; Retry-After says when the next attempt is allowed. Failed sign-ins
// spend the same budget, and a spent budget refuses a sign-in even with a good token.
func TestFailureBudgetRefillsToItsBurstOnly(t *testing.T) {
	e := newEnvLimited(t, 3)
	good, _ := e.token(t, "script", auth.ScopeRead, 0)
	attempts := func(n int) (codes []int, last *httptest.ResponseRecorder) {
		for range n {
			last = e.do("GET", "/api/thing", bearer("blt_nope"))
			codes = append(codes, last.Code)
		}
		return codes, last
	}
	codes, w := attempts(4)
	assert.Equal(t, []int{401, 401, 401, 429}, codes)
	assert.Equal(t, "21", w.Header().Get("Retry-After"), "one failure per 20 s comes back")
	e.clock.add(10 * time.Minute) // long enough to refill thirty
	codes, _ = attempts(4)
	assert.Equal(t, []int{401, 401, 401, 429}, codes, "a long wait refills the burst, not more")

	e.clock.add(10 * time.Minute)
	for range 3 {
		assert.Equal(t, 401, e.signIn("blt_nope", false).Code)
	}
	w = e.signIn(good, false)
	assert.Equal(t, 401, w.Code)
	assert.Contains(t, w.Body.String(), auth.ErrRateLimited.Error())
	assert.Equal(t, 429, e.do("GET", "/api/thing", bearer(good)).Code, "failed sign-ins spent the budget")
}

// Without settings: 30 failures per minute, sessions of 12 hours.
func TestDefaults(t *testing.T) {
	e := newEnvLimited(t, 0)
	for i := range auth.DefaultFailuresPerMinute {
		require.Equal(t, 401, e.do("GET", "/api/thing", bearer("blt_nope")).Code, "attempt %d", i+1)
	}
	assert.Equal(t, 429, e.do("GET", "/api/thing", bearer("blt_nope")).Code)
	assert.Equal(t, 30, auth.DefaultFailuresPerMinute)
	for _, cfg := range []auth.Config{{Store: e.store, FailuresPerMinute: -1}, {Store: e.store, SessionTTL: -time.Hour}} {
		_, err := auth.New(cfg)
		assert.Error(t, err, "%+v", cfg)
	}

	a, err := auth.New(auth.Config{Store: e.store, Clock: e.clock.Now})
	require.NoError(t, err)
	secret, _ := e.token(t, "desk", auth.ScopeRead, 0)
	w := httptest.NewRecorder()
	_, err = a.SignIn(w, httptest.NewRequest("POST", auth.LoginPath, nil), secret)
	require.NoError(t, err)
	assert.True(t, w.Result().Cookies()[0].Expires.Equal(e.clock.Now().Add(12*time.Hour)))
}

// A session ends at its instant, and never after its token's expiry; its cookie is Secure over TLS.
// It also ends when its token is revoked by any means: `token revoke` deletes the token's sessions, and
// a token revoked in the database alone (revoked_at set) ends them as well. The cookie counts on /admin
// itself too.
func TestSessionLifetimeAndRevocation(t *testing.T) {
	e := newEnv(t) // sessions of an hour
	short, _ := e.token(t, "short", auth.ScopeAdmin, 30*time.Minute)
	w := e.signIn(short, true)
	require.Equal(t, 200, w.Code, w.Body.String())
	c := w.Result().Cookies()[0]
	assert.True(t, c.Secure, "over TLS the cookie is Secure")
	assert.True(t, c.Expires.Equal(e.clock.Now().Add(30*time.Minute)), "the cookie ends with the token: %v", c.Expires)
	assert.Equal(t, http.StatusNotFound, e.do("GET", "/admin", func(r *http.Request) { r.AddCookie(c) }).Code, "signed in: past the policy to the mux")

	long, lt := e.token(t, "long", auth.ScopeRead, 0)
	c1 := e.signIn(long, false).Result().Cookies()[0]
	assert.False(t, c1.Secure)
	e.clock.add(59 * time.Minute)
	c2 := e.signIn(long, false).Result().Cookies()[0] // another browser
	withCookie := func(c *http.Cookie) func(*http.Request) { return func(r *http.Request) { r.AddCookie(c) } }
	assert.Equal(t, 200, e.do("GET", "/ui/page", withCookie(c1)).Code, "signing in elsewhere keeps the first session")
	e.clock.add(time.Minute)
	assert.Equal(t, http.StatusSeeOther, e.do("GET", "/ui/page", withCookie(c1)).Code, "an hour on the dot: ended")
	assert.Equal(t, 200, e.do("GET", "/ui/page", withCookie(c2)).Code)
	e.clock.add(time.Second)
	e.signIn(long, false) // a new session clears the ended ones
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM ui_sessions WHERE token_id = $1`, lt.ID).Scan(&n))
	assert.Equal(t, 2, n, "the ended session is deleted, the live ones stay")

	_, err := e.pool.Exec(context.Background(), `UPDATE api_tokens SET revoked_at = now() WHERE id = $1`, lt.ID)
	require.NoError(t, err)
	assert.Equal(t, http.StatusSeeOther, e.do("GET", "/ui/page", withCookie(c2)).Code, "revoked in the database: the session ends")
	other, ot := e.token(t, "other", auth.ScopeRead, 0)
	e.signIn(other, false)
	_, err = e.store.Revoke(context.Background(), ot.Name, e.clock.Now())
	require.NoError(t, err)
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM ui_sessions WHERE token_id = $1`, ot.ID).Scan(&n))
	assert.Zero(t, n, "revoking deletes the token's sessions")
}

// Revoke takes an id before a name: a token named like another token's id does not shadow it. Once
// that one is revoked, the same reference names the other by its name. List is oldest first. Last use
// never moves backwards (two processes write it).
func TestTokenStoreRevokeListAndTouch(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	_, first := e.token(t, "first", auth.ScopeRead, 0)
	e.clock.add(time.Second)
	_, named := e.token(t, first.ID, auth.ScopeRead, 0)
	got, err := e.store.Revoke(ctx, first.ID, e.clock.Now())
	require.NoError(t, err)
	assert.Equal(t, first.ID, got.ID, "the id wins")
	got, err = e.store.Revoke(ctx, first.ID, e.clock.Now())
	require.NoError(t, err)
	assert.Equal(t, named.ID, got.ID, "then the active token of that name")
	_, err = e.store.Revoke(ctx, first.ID, e.clock.Now())
	require.ErrorIs(t, err, auth.ErrNotFound)
	list, err := e.store.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, []string{first.ID, named.ID}, []string{list[0].ID, list[1].ID})

	now := e.clock.Now()
	require.NoError(t, e.store.TouchToken(ctx, first.ID, now))
	require.NoError(t, e.store.TouchToken(ctx, first.ID, now.Add(-time.Minute)))
	tk, err := e.store.Token(ctx, first.ID)
	require.NoError(t, err)
	assert.True(t, tk.LastUsedAt.Equal(now), "%v", tk.LastUsedAt)
}

// The edges of names and lifetimes: a name of 64 bytes is fine, one with DEL or that is not UTF-8 is
// not; a negative lifetime is refused; days go up to 3650; a lifetime of zero is none.
func TestTokenNameAndLifetimeEdges(t *testing.T) {
	now := time.Now()
	_, _, err := auth.NewToken(strings.Repeat("x", auth.MaxNameLength), auth.ScopeRead, now, 0)
	require.NoError(t, err)
	for _, bad := range []string{"del\x7f", "bad\xffutf8"} {
		_, _, err := auth.NewToken(bad, auth.ScopeRead, now, 0)
		assert.ErrorIs(t, err, auth.ErrInvalidToken, "%q", bad)
	}
	_, _, err = auth.NewToken("neg", auth.ScopeRead, now, -time.Hour)
	assert.ErrorIs(t, err, auth.ErrInvalidToken)
	d, err := auth.ParseLifetime("3650d")
	require.NoError(t, err)
	assert.Equal(t, 3650*24*time.Hour, d)
	for _, bad := range []string{"3651d", "0s", "0h"} {
		_, err := auth.ParseLifetime(bad)
		assert.Error(t, err, bad)
	}
}
