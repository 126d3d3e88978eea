package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

type calendarEntryAnswer struct {
	Booking   string `json:"booking"`
	Resource  string `json:"resource"`
	Canonical string `json:"canonical_resource"`
	Status    string `json:"status"`
}

// resourcesEndToEnd links a Calendly host and a Cal.com organizer through the binary's code: the
// calendar shows the provider identifiers to link, `resources link` makes the two bookings one
// conflict, the admin API unlinks them again, and BOOKINGLEDGER_RESOURCES_FILE applied at two starts
// appends its link once.
func resourcesEndToEnd(t *testing.T, vars map[string]string) {
	vars["BOOKINGLEDGER_ADDR"] = "127.0.0.1:0"
	vars["BOOKINGLEDGER_CALENDLY_SIGNING_KEYS"] = demoCalendlyKey
	vars["BOOKINGLEDGER_CALCOM_SECRETS"] = demoCalcomSecret
	vars["BOOKINGLEDGER_DRAIN_TIMEOUT"] = "5s"
	env := envOf(vars)
	srv := startServe(t, env)
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "intro", "--host", "dr-smith-calendly")
	send(t, env, srv.Base, "calcom", "BOOKING_CREATED", "--booking", "treat", "--host", "dr-smith-calcom")
	const from, to = "2030-01-07T00:00:00Z", "2030-01-08T00:00:00Z"
	waitForCalendar(t, srv.AdminToken(t), srv.Admin, from, to, map[string]string{"calendly-intro": "active", "calcom-treat": "active"})

	// `bookingledger calendar` shows each provider's resource identifier.
	out, errOut, code := cli(t, env, "calendar", "--from", from, "--to", to, "--json")
	require.Equal(t, 0, code, errOut)
	var cal struct {
		Bookings []calendarEntryAnswer `json:"bookings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &cal))
	var ids []string
	for _, b := range cal.Bookings {
		assert.Equal(t, b.Resource, b.Canonical, "unlinked: its own canonical resource")
		ids = append(ids, b.Resource)
	}
	slices.Sort(ids)
	require.Len(t, ids, 2)
	require.NotEqual(t, ids[0], ids[1])

	out, errOut, code = cli(t, env, append([]string{"resources", "link", "dr-smith"}, ids...)...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "linked dr-smith: "+ids[0]+", "+ids[1])
	waitFor(t, 30*time.Second, "one holder and one conflict", func() (bool, string) {
		st := statusesOf(t, srv, from, to)
		return slices.Equal(sortedValues(st), []string{"active", "conflict"}), strings.Join(sortedValues(st), ",")
	})
	out, errOut, code = cli(t, env, "calendar", "--from", from, "--to", to, "--resource", "dr-smith")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "dr-smith ("+ids[0]+")", "the table shows the canonical resource and the provider's")
	assert.Contains(t, out, "dr-smith ("+ids[1]+")")
	out, _, code = cli(t, env, "calendar", "--from", from, "--to", to, "--resource", ids[1], "--json")
	require.Equal(t, 0, code)
	assert.Equal(t, 1, strings.Count(out, `"booking"`), "a provider identifier selects its own bookings: %s", out)
	items, _, code := cli(t, env, "reconcile", "list")
	require.Equal(t, 0, code)
	assert.Contains(t, items, "on dr-smith")

	// A provider resource belongs to one name: a clear error, exit 1, nothing appended.
	_, errOut, code = cli(t, env, "resources", "link", "dr-jones", ids[0])
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, ids[0]+" is linked to dr-smith")
	_, errOut, code = cli(t, env, "resources", "link", "bad name", ids[0])
	assert.Equal(t, 2, code, "a malformed name is a usage error")
	assert.Contains(t, errOut, "only letters")

	// The admin API needs an admin token, to read too; a change records the token's name.
	readTok := cliToken(t, env, "resources-reader", "read")
	status, body := httpDo(t, readTok, http.MethodGet, srv.Admin+"/api/admin/resources", "")
	assert.Equal(t, http.StatusForbidden, status, body)
	status, body = httpDo(t, srv.AdminToken(t), http.MethodGet, srv.Admin+"/api/admin/resources", "")
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"resources":[{"name":"dr-smith","provider_resources":["`+ids[0]+`","`+ids[1]+`"]}],"version":1}`, body)
	status, body = httpDo(t, readTok, http.MethodPost, srv.Admin+"/api/admin/resources/dr-smith/unlink", `{"provider_resources":["`+ids[1]+`"]}`)
	assert.Equal(t, http.StatusForbidden, status, body)
	status, body = httpDo(t, srv.AdminToken(t), http.MethodPost, srv.Admin+"/api/admin/resources/dr-jones/link", `{"provider_resources":["`+ids[1]+`"]}`)
	assert.Equal(t, http.StatusConflict, status, body)
	assert.Contains(t, body, `"code":"linked_elsewhere"`)
	status, body = httpDo(t, srv.AdminToken(t), http.MethodPost, srv.Admin+"/api/admin/resources/dr-smith/link", `{"resources":["x"]}`)
	assert.Equal(t, http.StatusBadRequest, status, body)
	status, body = httpDo(t, srv.AdminToken(t), http.MethodPost, srv.Admin+"/api/admin/resources/dr-smith/unlink", `{"provider_resources":["`+ids[1]+`"]}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"by":"`+srv.AdminTokenName(t)+`"`)
	waitForCalendar(t, srv.AdminToken(t), srv.Admin, from, to, map[string]string{"calendly-intro": "active", "calcom-treat": "active"})
	items, _, _ = cli(t, env, "reconcile", "list")
	assert.NotContains(t, items, "on dr-smith", "the conflict item closed itself")
	status, body = httpDo(t, srv.AdminToken(t), http.MethodGet, srv.Admin+"/api/admin/resources/dr-smith", "")
	require.Equal(t, http.StatusOK, status, body)
	var show struct {
		ProviderResources []string `json:"provider_resources"`
		History           []struct {
			Type string `json:"type"`
			By   string `json:"by"`
		} `json:"history"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &show))
	assert.Equal(t, []string{ids[0]}, show.ProviderResources)
	require.Len(t, show.History, 2)
	assert.Equal(t, "resource.linked.v1", show.History[0].Type)
	assert.True(t, strings.HasPrefix(show.History[0].By, "cli"), show.History[0].By)
	assert.Equal(t, "resource.unlinked.v1", show.History[1].Type)
	status, _ = httpDo(t, srv.AdminToken(t), http.MethodGet, srv.Admin+"/api/admin/resources/nobody", "")
	assert.Equal(t, http.StatusNotFound, status)
	srv.Stop(t)

	// The file, applied at two starts: the first appends the missing link, the second nothing.
	file := filepath.Join(t.TempDir(), "resources.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"resources": {"dr-smith": ["`+ids[0]+`", "`+ids[1]+`"]}}`), 0o600))
	vars[envResourcesFile] = file
	for start := 1; start <= 2; start++ {
		srv = startServe(t, env)
		waitFor(t, 30*time.Second, "the file's link in the calendar", func() (bool, string) {
			st := statusesOf(t, srv, from, to)
			return slices.Equal(sortedValues(st), []string{"active", "conflict"}), strings.Join(sortedValues(st), ",")
		})
		out, errOut, code = cli(t, env, "resources", "show", "dr-smith", "--json")
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, 3, strings.Count(out, `"event_id"`), "start %d: link, unlink, and the file's link once: %s", start, out)
		assert.Equal(t, 1, strings.Count(out, `"by": "file `+file+`"`), "start %d", start)
		srv.Stop(t)
	}

	// A rebuild with the links in the log reproduces the calendar.
	before, _, _ := cli(t, env, "calendar", "--from", from, "--to", to, "--json")
	_, errOut, code = cli(t, env, "rebuild", "calendar", "--quiet")
	require.Equal(t, 0, code, errOut)
	after, _, _ := cli(t, env, "calendar", "--from", from, "--to", to, "--json")
	assert.JSONEq(t, before, after)

	// A file naming one provider resource under two names is a configuration error at start.
	require.NoError(t, os.WriteFile(file, []byte(`{"resources": {"a": ["`+ids[0]+`"], "b": ["`+ids[0]+`"]}}`), 0o600))
	_, errOut, code = cli(t, env, "serve")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "is listed under a and b")
}

func statusesOf(t *testing.T, srv *servedProcess, from, to string) map[string]string {
	t.Helper()
	var c calendarAnswer
	getJSON(t, srv.AdminToken(t), srv.Admin+"/api/calendar?from="+from+"&to="+to, &c)
	out := map[string]string{}
	for _, b := range c.Bookings {
		out[b.Booking] = b.Status
	}
	return out
}

func sortedValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

func cliToken(t *testing.T, env func(string) string, name, scope string) string {
	t.Helper()
	out, errOut, code := cli(t, env, "token", "create", "--name", name, "--scope", scope)
	require.Equal(t, 0, code, errOut)
	return strings.TrimSpace(out)
}

func TestResourcesEndToEnd(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	resourcesEndToEnd(t, map[string]string{"BOOKINGLEDGER_DATABASE_URL": servetest.NewDatabaseURL(t)})
}

// TestResourcesEndToEndWithEventStoreDB: the same with the events, links included, in EventStoreDB.
func TestResourcesEndToEndWithEventStoreDB(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	es := esdbtest.New(t)
	resourcesEndToEnd(t, map[string]string{
		"BOOKINGLEDGER_DATABASE_URL": servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_EVENT_STORE":  es.ConnString(),
	})
}
