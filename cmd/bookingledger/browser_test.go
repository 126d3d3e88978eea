package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
)

// envChromium names a browser binary; without it the test looks for Debian's chromium on PATH.
const envChromium = "BOOKINGLEDGER_CHROMIUM"

// envArtifacts is where browser tests write their screenshots (t.TempDir when unset).
const envArtifacts = "BOOKINGLEDGER_TEST_ARTIFACTS"

// browser starts a headless Chromium for the test, with the flags this closed network needs (no
// sandbox as root, no background networking, updates or sync, a fresh profile). Without a browser it
// skips locally and fails under CI=true.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv(envChromium)
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		msg := "browser tests need Chromium: 'apt-get install chromium' (make test installs it when run as root), or set " + envChromium
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: browser tests must run)")
		}
		t.Skip(msg)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Do starts the browser; it lives as long as ctx (no timeout here, see chromedp.Run).
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")), "start %s", path)
	return ctx
}

// step runs actions with a bound, so that a missing element fails the test instead of hanging it.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(sctx, actions...), what)
}

func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	require.NoError(t, err, what)
	return v
}

func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(envArtifacts)
	if dir == "" {
		return t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// TestOperatorUIInABrowser walks the README tour's bookings through the UI in headless Chromium:
// sign in, the calendar, a timeline's duplicate-delivery finding, a conflict resolved in the inbox, a
// cross-origin form post refused, sign out.
func TestOperatorUIInABrowser(t *testing.T) {
	ctx := browser(t)
	shots := artifacts(t)
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          pgtest.NewEmptyDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
	})
	srv := startServe(t, env)
	public, base, tok := srv.base, srv.admin, srv.token // the UI and the API are on the admin listener
	// The operator signs in with a token of their own; its name is what the UI shows and records.
	out, errOut, code := cli(t, env, "token", "create", "--name", "front-desk", "--scope", "admin", "--expires", "1d")
	require.Equal(t, 0, code, errOut)
	operator := strings.TrimSpace(out)
	// The README tour: a booking created, redelivered and canceled; one slot booked twice.
	const start = "2026-12-01T10:00:00Z"
	send(t, env, public, "calendly", "invitee.created", "--booking", "demo-1", "--start", start)
	send(t, env, public, "calendly", "invitee.created", "--booking", "demo-1", "--start", start)
	send(t, env, public, "calendly", "invitee.canceled", "--booking", "demo-1", "--start", start)
	send(t, env, public, "calendly", "invitee.created", "--booking", "demo-2", "--start", start)
	send(t, env, public, "calendly", "invitee.created", "--booking", "demo-3", "--start", start)
	waitForCalendar(t, tok, base, "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z",
		map[string]string{"calendly-demo-1": "canceled", "calendly-demo-2": "active", "calendly-demo-3": "conflict"})
	var items struct {
		Items []struct {
			ID      int64  `json:"id"`
			Booking string `json:"booking"`
		} `json:"items"`
	}
	getJSON(t, tok, base+"/api/reconciliation", &items)
	require.Len(t, items.Items, 1)
	conflict := items.Items[0]
	require.Equal(t, "calendly-demo-3", conflict.Booking)

	// Without a session every page sends the browser to sign in; a wrong token is refused.
	step(t, ctx, "open the calendar signed out", chromedp.Navigate(base+"/ui/calendar?date=2026-12-01"), chromedp.WaitVisible(chromedp.CSS("#token")))
	step(t, ctx, "a wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "blt_000000000000_wrong"), chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#login-error")))
	screenshot(t, ctx, shots, "ui-sign-in")
	step(t, ctx, "sign in", chromedp.SetValue(chromedp.CSS("#token"), operator), chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#calendar")))
	assert.Contains(t, value(t, ctx, "location", chromedp.Location()), "/ui/calendar?date=2026-12-01", "back where sign-in was asked for")
	assert.Equal(t, "front-desk", value(t, ctx, "who", chromedp.Text(chromedp.CSS("#who"))))

	// The calendar shows the tour's bookings with their status, the conflict and the slot's holder.
	cal := value(t, ctx, "calendar", chromedp.Text(chromedp.CSS("#calendar")))
	for _, want := range []string{"https://api.calendly.com/users/demo-host", "10:00–10:30 calendly-demo-1 canceled",
		"calendly-demo-2 active holds slot", "calendly-demo-3 conflict"} {
		assert.Contains(t, cal, want)
	}
	screenshot(t, ctx, shots, "ui-calendar")

	// The timeline of the redelivered booking names the duplicate delivery.
	step(t, ctx, "open a booking", chromedp.Click(chromedp.CSS(`a[data-booking="calendly-demo-1"]`)), chromedp.WaitVisible(chromedp.CSS("#findings")))
	findings := value(t, ctx, "findings", chromedp.Text(chromedp.CSS("ul.findings")))
	assert.Contains(t, findings, "duplicate_delivery")
	assert.Contains(t, value(t, ctx, "receipts", chromedp.Text(chromedp.CSS("section[aria-labelledby=receipts] table"))), "duplicate")
	assert.Contains(t, value(t, ctx, "arrival", chromedp.Text(chromedp.CSS("section[aria-labelledby=arrival] table"))), "booking.canceled.v1")
	screenshot(t, ctx, shots, "ui-timeline")

	// A form posted from another origin (another port of the same host: the same site, so the
	// SameSite cookie goes along) is refused by the cross-origin protection, and changes nothing.
	action := fmt.Sprintf("%s/ui/reconciliation/%d/resolve", base, conflict.ID)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s"><input name="note" value="forged"></form>
<script>document.getElementById("f").submit()</script>`, action)
	}))
	defer evil.Close()
	step(t, ctx, "a cross-origin post", chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS("body pre")))
	refused := value(t, ctx, "refusal", chromedp.Text(chromedp.CSS("body pre")))
	assert.Contains(t, refused, `"code":"cross_origin"`)
	getJSON(t, tok, base+"/api/reconciliation", &items)
	require.Len(t, items.Items, 1, "the forged resolution changed nothing")

	// The inbox resolves the conflict with a note; it is gone afterwards, recorded with the token's name.
	step(t, ctx, "open the inbox", chromedp.Navigate(base+"/ui/reconciliation"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#item-%d", conflict.ID))))
	screenshot(t, ctx, shots, "ui-inbox")
	step(t, ctx, "resolve", chromedp.SendKeys(chromedp.CSS(fmt.Sprintf("#note-%d", conflict.ID)), "host confirmed demo-2; demo-3 moves"),
		chromedp.Click(chromedp.CSS(fmt.Sprintf("#item-%d button", conflict.ID))), chromedp.WaitVisible(chromedp.CSS("#resolved-notice")),
		chromedp.WaitNotPresent(chromedp.CSS(fmt.Sprintf("#item-%d", conflict.ID))), chromedp.WaitVisible(chromedp.CSS("#inbox-empty")))
	getJSON(t, tok, base+"/api/reconciliation", &items)
	assert.Empty(t, items.Items)
	_, hist := httpDo(t, tok, http.MethodGet, base+"/api/bookings/calendly-demo-3/history", "")
	assert.Contains(t, hist, "closed", "the resolution is in the booking's history")
	assert.Contains(t, hist, "by operator front-desk: host confirmed demo-2", "recorded with the signed-in token's name")

	step(t, ctx, "deliveries log", chromedp.Navigate(base+"/ui/deliveries?provider=calendly&outcome=duplicate"), chromedp.WaitVisible(chromedp.CSS("#deliveries")))
	log := value(t, ctx, "deliveries", chromedp.Text(chromedp.CSS("#deliveries tbody")))
	assert.Contains(t, log, "calendly-demo-1")
	assert.NotContains(t, log, "accepted", "filtered by outcome")
	screenshot(t, ctx, shots, "ui-deliveries")

	// River's own UI, admin only, works through the same session (its API is fetched by its pages).
	step(t, ctx, "River's UI", chromedp.Click(chromedp.CSS(`a[href="/admin/jobs/"]`)), chromedp.WaitReady(chromedp.CSS("#root")))
	assert.Equal(t, "River", value(t, ctx, "title", chromedp.Title()))
	api := value(t, ctx, "River's API", chromedp.Evaluate[string](`fetch("/admin/jobs/api/jobs?state=available&limit=5").then(r => r.status + " " + r.headers.get("content-type"))`, chromedp.EvalAwaitPromise))
	assert.True(t, strings.HasPrefix(api, "200 application/json"), api)

	// A phone-sized window still reads the calendar.
	step(t, ctx, "phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/ui/calendar?date=2026-12-01&view=day"), chromedp.WaitVisible(chromedp.CSS("#calendar")))
	screenshot(t, ctx, shots, "ui-calendar-phone")
	step(t, ctx, "desktop", chromedp.EmulateViewport(1280, 900))

	step(t, ctx, "sign out", chromedp.Click(chromedp.CSS("#sign-out")), chromedp.WaitVisible(chromedp.CSS("#token")))
	step(t, ctx, "signed out for good", chromedp.Navigate(base+"/ui/reconciliation"), chromedp.WaitVisible(chromedp.CSS("#token")))
	assert.Contains(t, value(t, ctx, "location", chromedp.Location()), "/ui/login?next=")
	t.Logf("screenshots in %s", shots)
}
