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

	"bookingledger/cmd/bookingledger/internal/servetest"
)

// envChromium names a browser binary; without it the test looks for Debian's chromium on PATH.
const envChromium = "BOOKINGLEDGER_CHROMIUM"

// envArtifacts is where browser tests write their screenshots (t.TempDir when unset).
const envArtifacts = "BOOKINGLEDGER_TEST_ARTIFACTS"

// browser starts a headless Chromium for the test, with the flags this closed network needs (no
// sandbox as root, no background networking, updates or sync, a fresh profile). Without a browser it
// skips locally and fails under CI=true.
// chromium is taken by the test that runs Chromium, until it ends: one at a time (two at once on two
// loaded cores took a screenshot past its 45 s bound), while the other tests run beside it.
var chromium = make(chan struct{}, 1)

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
	chromium <- struct{}{}
	t.Cleanup(func() { <-chromium }) // after the browser's cleanup below: cleanups run last-in first-out
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

// clickFound waits for sel and clicks it, again when Chromium answers that the node it found is gone
// ("Could not find node with given id": the document changed between the lookup and the click, as
// River's page can while its scripts start). Any other failure, or five of those, fails the test.
func clickFound(t *testing.T, ctx context.Context, what, sel string) {
	t.Helper()
	var err error
	for range 5 {
		sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		err = chromedp.Do(sctx, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
		cancel()
		if err == nil || !strings.Contains(err.Error(), "Could not find node with given id") {
			break
		}
	}
	require.NoError(t, err, what)
}

// pollAcrossNavigation waits until expr is true in the page, polling again when the page it polled
// navigated away meanwhile ("Inspected target navigated or closed", "Cannot find context with
// specified id": a click's navigation that started after the click returned). Any other failure, or
// ten of those, fails the test.
func pollAcrossNavigation(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	var err error
	for range 10 {
		sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		err = chromedp.Do(sctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second)))
		cancel()
		if err == nil || !strings.Contains(err.Error(), "Inspected target navigated or closed") &&
			!strings.Contains(err.Error(), "Cannot find context with specified id") {
			break
		}
	}
	require.NoError(t, err, what)
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
	t.Parallel() // the slowest tests of the package overlap; each has its own database and ports
	ctx := browser(t)
	shots := artifacts(t)
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
	})
	srv := startServe(t, env)
	public, base, tok := srv.Base, srv.Admin, srv.AdminToken(t) // the UI and the API are on the admin listener
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

	// The calendar shows the tour's bookings with their invitee (from the contacts table), status, the
	// conflict and the slot's holder, in rows named by the host, not by Calendly's URI.
	cal := value(t, ctx, "calendar", chromedp.Text(chromedp.CSS("#calendar")))
	for _, want := range []string{"demo-host", "10:00–10:30 Ada Lovelace canceled", "Ada Lovelace active holds slot", "Ada Lovelace conflict"} {
		assert.Contains(t, cal, want)
	}
	assert.NotContains(t, cal, "https://api.calendly.com", "the host's URI is in the title only")
	assert.NotContains(t, cal, "calendly-demo-", "cards name the invitee; the booking id is in the title")
	assert.Equal(t, "Ada Lovelace", value(t, ctx, "demo-2's invitee", chromedp.Text(chromedp.CSS(`a[data-booking="calendly-demo-2"] .inv`))))
	assert.Contains(t, value(t, ctx, "day header", chromedp.Text(chromedp.CSS("#calendar thead"))), "Tue 1 Dec 2026")
	screenshot(t, ctx, shots, "ui-calendar")

	// The time zone selector shows the same slot in Berlin (UTC+1 in December), and the choice stays
	// (a cookie) on the next page; back to UTC.
	step(t, ctx, "Berlin", chromedp.SetValue(chromedp.CSS("#tz"), "Europe/Berlin"), chromedp.Click(chromedp.CSS("#set-tz")),
		chromedp.Poll[chromedp.Void](`document.querySelector("#tz") && document.querySelector("#tz").dataset.current === "Europe/Berlin" && document.querySelector("#calendar")`,
			chromedp.WithPollingTimeout(30*time.Second)))
	assert.Contains(t, value(t, ctx, "location", chromedp.Location()), "/ui/calendar?date=2026-12-01", "back on the page it was chosen on")
	assert.Contains(t, value(t, ctx, "Berlin times", chromedp.Text(chromedp.CSS(`a[data-booking="calendly-demo-2"] .time`))), "11:00–11:30")
	step(t, ctx, "a timeline in Berlin", chromedp.Navigate(base+"/ui/bookings/calendly-demo-2"), chromedp.WaitVisible(chromedp.CSS("#booking-when")))
	assert.Contains(t, value(t, ctx, "when", chromedp.Text(chromedp.CSS("#booking-when"))), "Tue 1 Dec 2026, 11:00–11:30 (Europe/Berlin)")
	step(t, ctx, "UTC", chromedp.SetValue(chromedp.CSS("#tz"), "UTC"), chromedp.Click(chromedp.CSS("#set-tz")),
		chromedp.Poll[chromedp.Void](`document.querySelector("#tz") && document.querySelector("#tz").dataset.current === "UTC" && document.querySelector("#booking-when")`,
			chromedp.WithPollingTimeout(30*time.Second)))
	assert.Contains(t, value(t, ctx, "when", chromedp.Text(chromedp.CSS("#booking-when"))), "Tue 1 Dec 2026, 10:00–10:30 (UTC)")

	// A link to a week (what the docs give) opens on that week's Monday, whatever day it names.
	step(t, ctx, "the week link", chromedp.Navigate(base+"/ui/calendar?week=2026-12-03"), chromedp.WaitVisible(chromedp.CSS("#calendar")))
	assert.Equal(t, "Mon 30 Nov 2026 – Sun 6 Dec 2026", value(t, ctx, "window", chromedp.Text(chromedp.CSS("#window"))))
	head := value(t, ctx, "week", chromedp.Text(chromedp.CSS("#calendar thead")))
	assert.Contains(t, head, "Mon 30 Nov 2026")
	assert.Contains(t, head, "Sun 6 Dec 2026")
	assert.Contains(t, value(t, ctx, "week's cards", chromedp.Text(chromedp.CSS(`#calendar td[data-day="2026-12-01"]`))), "Ada Lovelace active holds slot")

	// Search by booking id, name and email (the top box on every page).
	search := func(q string) string {
		t.Helper()
		step(t, ctx, "search "+q, chromedp.SetValue(chromedp.CSS("#top-q"), q), chromedp.Click(chromedp.CSS("#top-search")))
		pollAcrossNavigation(t, ctx, "search "+q,
			fmt.Sprintf(`document.querySelector("#q") && document.querySelector("#q").value === %q && document.querySelector("#search-results, #no-hits")`, q))
		return value(t, ctx, "hits for "+q, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#search-results li")).map(li => li.dataset.booking).join(" ")`))
	}
	assert.Equal(t, "calendly-demo-3", search("calendly-demo-3"), "by booking id")
	assert.ElementsMatch(t, []string{"calendly-demo-1", "calendly-demo-2", "calendly-demo-3"}, strings.Fields(search("lovelace")), "by name")
	assert.ElementsMatch(t, []string{"calendly-demo-1", "calendly-demo-2", "calendly-demo-3"}, strings.Fields(search("ADA.LOVELACE@example")), "by email, any case")
	assert.Contains(t, value(t, ctx, "a hit", chromedp.Text(chromedp.CSS("#search-results"))), "ada.lovelace@example.com")
	screenshot(t, ctx, shots, "ui-search")
	// A page's error reaches the screen also when htmx made the request (a boosted form): a 400 page.
	step(t, ctx, "a search too long", chromedp.SetValue(chromedp.CSS("#q"), strings.Repeat("x", 201)), chromedp.Click(chromedp.CSS("#main button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#error-message")))
	assert.Contains(t, value(t, ctx, "error", chromedp.Text(chromedp.CSS("#error-message"))), "search for at most 200 bytes")

	// The timeline of the redelivered booking tells its story first (booked, the same notice again,
	// canceled); the internals wait behind a fold, and name the duplicate delivery.
	step(t, ctx, "the calendar again", chromedp.Navigate(base+"/ui/calendar?date=2026-12-01"), chromedp.WaitVisible(chromedp.CSS("#calendar")))
	step(t, ctx, "open a booking", chromedp.Click(chromedp.CSS(`a[data-booking="calendly-demo-1"]`)), chromedp.WaitVisible(chromedp.CSS("#story")))
	assert.Equal(t, "Ada Lovelace", value(t, ctx, "title", chromedp.Text(chromedp.CSS("h1"))))
	story := value(t, ctx, "story", chromedp.Text(chromedp.CSS("#story")))
	for _, want := range []string{"Calendly booked it.", "Calendly sent the same notice again; nothing changed.", "Calendly canceled it"} {
		assert.Contains(t, story, want)
	}
	assert.NotContains(t, story, "booking.scheduled.v1", "the story speaks plainly")
	assert.False(t, value(t, ctx, "fold closed", chromedp.Evaluate[bool](`document.querySelector("#internals").open`)), "internals folded away")
	screenshot(t, ctx, shots, "ui-timeline")
	step(t, ctx, "open the internals", chromedp.Click(chromedp.CSS("#internals > summary")), chromedp.WaitVisible(chromedp.CSS("#findings")))
	findings := value(t, ctx, "findings", chromedp.Text(chromedp.CSS("ul.findings")))
	assert.Contains(t, findings, "duplicate_delivery")
	assert.Contains(t, value(t, ctx, "receipts", chromedp.Text(chromedp.CSS("section[aria-labelledby=receipts] table"))), "duplicate")
	assert.Contains(t, value(t, ctx, "arrival", chromedp.Text(chromedp.CSS("section[aria-labelledby=arrival] table"))), "booking.canceled.v1")
	screenshot(t, ctx, shots, "ui-timeline-internals")

	// A form posted from another origin (another port of the same host: the same site, so the
	// SameSite cookie goes along) is refused by the cross-origin protection, and changes nothing.
	action := fmt.Sprintf("%s/ui/reconciliation/%d/resolve", base, conflict.ID)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s"><input name="note" value="forged"></form>
<script>document.getElementById("f").submit()</script>`, action)
	}))
	defer evil.Close()
	step(t, ctx, "a cross-origin post", chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS("#error-message")))
	refused := value(t, ctx, "refusal", chromedp.Text(chromedp.CSS("main")))
	assert.Contains(t, refused, "cross-origin request refused", "a page, not JSON")
	assert.Contains(t, refused, "nothing changed")
	getJSON(t, tok, base+"/api/reconciliation", &items)
	require.Len(t, items.Items, 1, "the forged resolution changed nothing")

	// The inbox resolves the conflict with a note; it is gone afterwards, recorded with the token's name.
	step(t, ctx, "open the inbox", chromedp.Navigate(base+"/ui/reconciliation"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#item-%d", conflict.ID))))
	assert.Contains(t, value(t, ctx, "guidance", chromedp.Text(chromedp.CSS("section[aria-labelledby=kind-conflict] .guide"))), "at the provider",
		"the inbox says what a conflict asks for")
	screenshot(t, ctx, shots, "ui-inbox")
	step(t, ctx, "resolve", chromedp.SendKeys(chromedp.CSS(fmt.Sprintf("#note-%d", conflict.ID)), "host confirmed demo-2; demo-3 moves"),
		chromedp.Click(chromedp.CSS(fmt.Sprintf("#item-%d button", conflict.ID))), chromedp.WaitVisible(chromedp.CSS("#resolved-notice")),
		chromedp.WaitNotPresent(chromedp.CSS(fmt.Sprintf("#item-%d", conflict.ID))), chromedp.WaitVisible(chromedp.CSS("#inbox-empty")))
	assert.Contains(t, value(t, ctx, "resolved conflict", chromedp.Text(chromedp.CSS("#resolved-conflict"))), "The provider still holds both bookings.")
	screenshot(t, ctx, shots, "ui-inbox-resolved")
	step(t, ctx, "the loser's timeline", chromedp.Navigate(base+"/ui/bookings/calendly-demo-3"), chromedp.WaitVisible(chromedp.CSS("#conflict-note")))
	assert.Contains(t, value(t, ctx, "conflict note", chromedp.Text(chromedp.CSS("#conflict-note"))), "The provider still shows both bookings")
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

	// River's own UI, admin only, works through the same session (its API is fetched by its pages),
	// and has a way back to the operator UI.
	step(t, ctx, "River's UI", chromedp.Click(chromedp.CSS(`a[href="/admin/jobs/"]`)), chromedp.WaitReady(chromedp.CSS("#root")))
	assert.Equal(t, "River", value(t, ctx, "title", chromedp.Title()))
	api := value(t, ctx, "River's API", chromedp.Evaluate[string](`fetch("/admin/jobs/api/jobs?state=available&limit=5").then(r => r.status + " " + r.headers.get("content-type"))`, chromedp.EvalAwaitPromise))
	assert.True(t, strings.HasPrefix(api, "200 application/json"), api)
	clickFound(t, ctx, "back from River", "#back-to-ui")
	step(t, ctx, "back at the calendar", chromedp.WaitVisible(chromedp.CSS("#tz")))
	assert.Contains(t, value(t, ctx, "back at", chromedp.Location()), "/ui/calendar")

	// A phone-sized window reads every page without cutting it off: nothing is wider than the screen
	// (the week's table and the timeline's tables stack; the rest scroll inside their box).
	fits := func(what string) {
		t.Helper()
		w := value(t, ctx, what+" width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		assert.LessOrEqual(t, w, 390, "%s is no wider than the phone", what)
	}
	step(t, ctx, "phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/ui/calendar?week=2026-12-01"), chromedp.WaitVisible(chromedp.CSS("#calendar")))
	fits("the week")
	assert.Contains(t, value(t, ctx, "phone card", chromedp.Text(chromedp.CSS(`a[data-booking="calendly-demo-2"]`))), "Ada Lovelace")
	screenshot(t, ctx, shots, "ui-calendar-phone")
	step(t, ctx, "phone timeline", chromedp.Navigate(base+"/ui/bookings/calendly-demo-1"), chromedp.WaitVisible(chromedp.CSS("#story")),
		chromedp.Click(chromedp.CSS("#internals > summary")), chromedp.WaitVisible(chromedp.CSS("#findings")))
	fits("the timeline")
	screenshot(t, ctx, shots, "ui-timeline-phone")
	for _, page := range []string{"/ui/reconciliation", "/ui/deliveries", "/ui/search?q=ada"} {
		step(t, ctx, "phone "+page, chromedp.Navigate(base+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
		fits(page)
	}
	step(t, ctx, "desktop", chromedp.EmulateViewport(1280, 900))

	// Erasing the invitee of demo-2 takes their name off its card and out of the search: names come
	// from the contacts table only.
	out, errOut, code = cli(t, env, "erase", "--booking", "calendly-demo-2", "--by", "test")
	require.Equal(t, 0, code, errOut)
	step(t, ctx, "the calendar after erasure", chromedp.Navigate(base+"/ui/calendar?date=2026-12-01"), chromedp.WaitVisible(chromedp.CSS("#calendar")))
	erased := value(t, ctx, "erased card", chromedp.Text(chromedp.CSS(`a[data-booking="calendly-demo-2"]`)))
	assert.NotContains(t, erased, "Ada Lovelace")
	assert.Contains(t, erased, "calendly-demo-2", "the card falls back to the booking id")
	assert.Contains(t, value(t, ctx, "another card", chromedp.Text(chromedp.CSS(`a[data-booking="calendly-demo-3"]`))), "Ada Lovelace", "other bookings keep theirs")
	assert.ElementsMatch(t, []string{"calendly-demo-1", "calendly-demo-3"}, strings.Fields(search("lovelace")), "the erased booking is not found by name")
	assert.Equal(t, "calendly-demo-2", search("calendly-demo-2"), "but still by its id")
	assert.NotContains(t, value(t, ctx, "erased hit", chromedp.Text(chromedp.CSS("#search-results"))), "ada.lovelace")
	step(t, ctx, "the erased timeline", chromedp.Navigate(base+"/ui/bookings/calendly-demo-2"), chromedp.WaitVisible(chromedp.CSS("#booking-invitee")))
	assert.Contains(t, value(t, ctx, "erased invitee", chromedp.Text(chromedp.CSS("#booking-invitee"))), "No name or address kept")
	assert.NotContains(t, value(t, ctx, "erased page", chromedp.OuterHTML(chromedp.CSS("html"))), "Lovelace")

	step(t, ctx, "sign out", chromedp.Click(chromedp.CSS("#sign-out")), chromedp.WaitVisible(chromedp.CSS("#token")))
	step(t, ctx, "signed out for good", chromedp.Navigate(base+"/ui/reconciliation"), chromedp.WaitVisible(chromedp.CSS("#token")))
	assert.Contains(t, value(t, ctx, "location", chromedp.Location()), "/ui/login?next=")

	// A read-only user following an admin's link gets a page that says what is needed, not JSON; the
	// same for River's UI. An unknown page is a page too.
	out, errOut, code = cli(t, env, "token", "create", "--name", "desk-reader", "--scope", "read", "--expires", "1d")
	require.Equal(t, 0, code, errOut)
	step(t, ctx, "sign in to read", chromedp.SetValue(chromedp.CSS("#token"), strings.TrimSpace(out)), chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#inbox-empty")))
	for _, link := range []string{"/admin/jobs/", "/ui/admin/endpoints"} {
		step(t, ctx, "admin link "+link, chromedp.Navigate(base+link), chromedp.WaitVisible(chromedp.CSS("#error-help")))
		assert.Equal(t, "Admins only", value(t, ctx, "heading", chromedp.Text(chromedp.CSS("main h1"))), link)
		assert.Contains(t, value(t, ctx, "help", chromedp.Text(chromedp.CSS("#error-help"))), "needs a token with the admin scope", link)
		assert.Equal(t, "desk-reader", value(t, ctx, "who", chromedp.Text(chromedp.CSS("#who"))), "still signed in, with a way back")
		answer := value(t, ctx, "status", chromedp.Evaluate[string](fmt.Sprintf(`fetch(%q, {headers: {Accept: "text/html"}}).then(r => r.status + " " + r.headers.get("content-type"))`, link), chromedp.EvalAwaitPromise))
		assert.Equal(t, "403 text/html; charset=utf-8", answer, link)
	}
	screenshot(t, ctx, shots, "ui-forbidden")
	step(t, ctx, "no such page", chromedp.Navigate(base+"/ui/nowhere"), chromedp.WaitVisible(chromedp.CSS("#error-message")))
	assert.Equal(t, "Not found", value(t, ctx, "heading", chromedp.Text(chromedp.CSS("main h1"))))
	t.Logf("screenshots in %s", shots)
}
