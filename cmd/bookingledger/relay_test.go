package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/standard"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// hookSink is a receiver in the test: it verifies each message with the project's Standard Webhooks
// verifier once it knows the secret, and fails while told to.
type hookSink struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	verifier *standard.Provider
	fail     int // answer this status while non-zero
	ids      []string
	bodies   []string
	bad      []string
}

func newHookSink(t *testing.T) *hookSink {
	s := &hookSink{t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.fail != 0 {
			w.WriteHeader(s.fail)
			return
		}
		if s.verifier != nil {
			if _, err := s.verifier.Verify(r.Header, body, time.Now()); err != nil {
				s.bad = append(s.bad, err.Error())
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		s.ids = append(s.ids, r.Header.Get("webhook-id"))
		s.bodies = append(s.bodies, string(body))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *hookSink) setSecret(secret string) {
	p, err := standard.New(providers.NewSecrets(secret), 0)
	require.NoError(s.t, err)
	s.mu.Lock()
	s.verifier = p
	s.mu.Unlock()
}

func (s *hookSink) setFail(status int) {
	s.mu.Lock()
	s.fail = status
	s.mu.Unlock()
}

func (s *hookSink) received() (ids, bodies, bad []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...), append([]string(nil), s.bodies...), append([]string(nil), s.bad...)
}

// deliveryList is a list of relay deliveries as `deliveries --json` and GET /api/admin/deliveries
// answer it.
type deliveryList struct {
	Deliveries []struct {
		ID        int64  `json:"id"`
		WebhookID string `json:"webhook_id"`
	} `json:"deliveries"`
}

var secretLine = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`)

func relayEndToEnd(t *testing.T, vars map[string]string) {
	sink := newHookSink(t)
	alerts := newHookSink(t)
	vars["BOOKINGLEDGER_ADDR"] = "127.0.0.1:0"
	vars["BOOKINGLEDGER_CALENDLY_SIGNING_KEYS"] = demoCalendlyKey
	vars["BOOKINGLEDGER_DRAIN_TIMEOUT"] = "5s"
	vars["BOOKINGLEDGER_RELAY_ALLOW_PRIVATE"] = "true"
	vars["BOOKINGLEDGER_RELAY_SCHEDULE"] = "0s,100ms,100ms"
	vars["BOOKINGLEDGER_ALERT_URL"] = alerts.srv.URL
	vars["BOOKINGLEDGER_ALERT_FORMAT"] = "slack"
	env := envOf(vars)
	srv := startServe(t, env)
	base, admin := srv.Base, srv.Admin

	out, errOut, code := cli(t, env, "endpoints", "add", "--url", sink.srv.URL+"/hook", "--description", "crm")
	require.Equal(t, 0, code, errOut)
	secret := secretLine.FindString(out)
	require.NotEmpty(t, secret, out)
	sink.setSecret(secret)
	assert.Contains(t, out, "endpoint 1 added")

	t.Run("a private url is refused without the setting", func(t *testing.T) {
		strict := map[string]string{}
		for k, v := range vars {
			strict[k] = v
		}
		delete(strict, "BOOKINGLEDGER_RELAY_ALLOW_PRIVATE")
		_, errOut, code := cli(t, envOf(strict), "endpoints", "add", "--url", "http://127.0.0.1:9/x")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "not a public address")
		status, body := httpDo(t, srv.AdminToken(t), http.MethodPost, admin+"/api/admin/endpoints", `{"url":"ftp://example.com"}`)
		assert.Equal(t, http.StatusBadRequest, status, body)
		assert.Contains(t, body, `"code":"invalid_url"`)
	})

	// The provider retries its create: the ledger records it once, the relay sends it once.
	send(t, env, base, "calendly", "invitee.created", "--booking", "relay-a")
	out = send(t, env, base, "calendly", "invitee.created", "--booking", "relay-a")
	assert.Contains(t, out, `"status":"duplicate"`)
	waitFor(t, 30*time.Second, "the create delivered", func() (bool, string) {
		ids, _, _ := sink.received()
		return len(ids) == 1, fmt.Sprint(ids)
	})
	time.Sleep(300 * time.Millisecond)
	ids, bodies, bad := sink.received()
	assert.Len(t, ids, 1, "delivered once despite the provider's retry")
	assert.Empty(t, bad)
	var msg struct {
		Type string `json:"type"`
		Data struct {
			Booking string `json:"booking"`
			Version int    `json:"version"`
			State   struct {
				Status string `json:"status"`
			} `json:"state"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(bodies[0]), &msg))
	assert.Equal(t, "booking.scheduled.v1", msg.Type)
	assert.Equal(t, "calendly-relay-a", msg.Data.Booking)
	assert.Equal(t, 1, msg.Data.Version)
	assert.Equal(t, "active", msg.Data.State.Status)

	// The receiver has the message before the worker records its answer: wait for the record (on
	// the admin API, over serve's pool: a CLI run per poll opens a pool of its own), then list it.
	waitFor(t, 30*time.Second, "the delivery recorded as succeeded", func() (bool, string) {
		body := getJSON(t, srv.AdminToken(t), admin+"/api/admin/deliveries?state=succeeded", &deliveryList{})
		return strings.Contains(body, ids[0]), body
	})
	out, errOut, code = cli(t, env, "deliveries")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "succeeded")
	assert.Contains(t, out, ids[0])
	var byBooking struct {
		Deliveries []struct {
			WebhookID string `json:"webhook_id"`
			State     string `json:"state"`
		} `json:"deliveries"`
	}
	getJSON(t, srv.AdminToken(t), admin+"/api/bookings/calendly-relay-a/deliveries", &byBooking)
	require.Len(t, byBooking.Deliveries, 1)
	assert.Equal(t, ids[0], byBooking.Deliveries[0].WebhookID)
	out, errOut, code = cli(t, env, "history", "calendly-relay-a")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, ids[0], "history lists the booking's deliveries")

	// The sink fails: the first failure alerts (Slack-compatible), the schedule runs out, the
	// delivery is dead; after the sink recovers a replay of the failures sends it with its id.
	sink.setFail(http.StatusInternalServerError)
	send(t, env, base, "calendly", "invitee.canceled", "--booking", "relay-a")
	waitFor(t, 30*time.Second, "a dead delivery", func() (bool, string) {
		var dead deliveryList
		body := getJSON(t, srv.AdminToken(t), admin+"/api/admin/deliveries?state=dead", &dead)
		return len(dead.Deliveries) >= 1, body
	})
	out, errOut, code = cli(t, env, "deliveries", "--state", "dead")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "dead")
	// The streak's alert and the dead delivery's are sent apart, in either order.
	waitFor(t, 30*time.Second, "the 1-failure alert", func() (bool, string) {
		_, bodies, _ := alerts.received()
		for _, b := range bodies {
			if strings.Contains(b, `"text":"bookingledger relay: endpoint 1`) && strings.Contains(b, "failed 1 time(s) in a row") {
				return true, ""
			}
		}
		return false, fmt.Sprint(bodies)
	})
	sink.setFail(0)

	from := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	to := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	out, errOut, code = cli(t, env, "replay", "--endpoint", "1", "--from", from, "--to", to, "--only-failed", "--dry-run")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "would send 1 message(s)")
	assert.Contains(t, out, "booking.canceled.v1")
	out, errOut, code = cli(t, env, "replay", "--endpoint", "1", "--from", from, "--to", to, "--only-failed")
	require.Equal(t, 0, code, errOut+out)
	assert.Contains(t, out, "1/1 sent, 0 dead")
	ids, _, bad = sink.received()
	assert.Len(t, ids, 2)
	assert.Empty(t, bad)
	waitFor(t, 30*time.Second, "the recovery notice", func() (bool, string) {
		_, bodies, _ := alerts.received()
		return len(bodies) >= 2 && strings.Contains(bodies[len(bodies)-1], "recovered"), fmt.Sprint(bodies)
	})

	t.Run("retry one dead delivery from the CLI", func(t *testing.T) {
		sink.setFail(http.StatusInternalServerError)
		send(t, env, base, "calendly", "invitee.created", "--booking", "relay-b")
		waitFor(t, 30*time.Second, "relay-b's delivery dead", func() (bool, string) {
			var dead deliveryList
			body := getJSON(t, srv.AdminToken(t), admin+"/api/admin/deliveries?state=dead", &dead)
			return len(dead.Deliveries) == 1, body
		})
		var dead deliveryList
		out, errOut, code := cli(t, env, "deliveries", "--state", "dead", "--json")
		require.Equal(t, 0, code, errOut)
		require.NoError(t, json.Unmarshal([]byte(out), &dead), out)
		require.Len(t, dead.Deliveries, 1, out)
		sink.setFail(0)
		id := fmt.Sprint(dead.Deliveries[0].ID)
		out, errOut, code = cli(t, env, "deliveries", "retry", id)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "delivery "+id+" scheduled again as replay")
		waitFor(t, 30*time.Second, "the retried delivery received", func() (bool, string) {
			ids, _, _ := sink.received()
			return slices.Contains(ids, dead.Deliveries[0].WebhookID), fmt.Sprint(ids)
		})
		// The receiver has it before the relay records the success: retry it again only once it
		// is succeeded, which is what the refusal below is about.
		waitFor(t, 30*time.Second, "the retried delivery succeeded", func() (bool, string) {
			var done deliveryList
			body := getJSON(t, srv.AdminToken(t), admin+"/api/admin/deliveries?state=succeeded", &done)
			return slices.Contains(done.Deliveries, dead.Deliveries[0]), body
		})
		out, errOut, code = cli(t, env, "deliveries", "--state", "succeeded", "--json")
		require.Equal(t, 0, code, errOut)
		var done deliveryList
		require.NoError(t, json.Unmarshal([]byte(out), &done), out)
		assert.Contains(t, done.Deliveries, dead.Deliveries[0], out)
		_, errOut, code = cli(t, env, "deliveries", "retry", id)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "only a dead or a waiting pending delivery is retried")
		_, errOut, code = cli(t, env, "deliveries", "retry", "x")
		assert.Equal(t, 2, code, errOut)
	})

	t.Run("a window replay backfills a new endpoint", func(t *testing.T) {
		crm := newHookSink(t)
		out, errOut, code := cli(t, env, "endpoints", "add", "--url", crm.srv.URL+"/hook", "--types", "booking.scheduled.*")
		require.Equal(t, 0, code, errOut)
		crm.setSecret(secretLine.FindString(out))
		require.Contains(t, out, "endpoint 2 added")
		out, errOut, code = cli(t, env, "replay", "--endpoint", "2", "--from", from, "--to", to, "--dry-run")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "would send 2 message(s)", "relay-a's and relay-b's creates, recorded before the endpoint")
		assert.Contains(t, out, "booking.scheduled.v1")
		assert.NotContains(t, out, "booking.canceled.v1")
		out, errOut, code = cli(t, env, "replay", "--endpoint", "2", "--from", from, "--to", to, "--only-failed", "--dry-run")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "would send 0 message(s)", "--only-failed sends only what failed")
		for run := range 2 {
			out, errOut, code = cli(t, env, "replay", "--endpoint", "2", "--from", from, "--to", to)
			require.Equal(t, 0, code, errOut+out)
			assert.Contains(t, out, "2/2 sent, 0 dead", "run %d", run)
		}
		got, _, bad := crm.received()
		assert.Empty(t, bad)
		require.Len(t, got, 4, "each create once per replay")
		assert.ElementsMatch(t, got[:2], got[2:], "the second replay sends the same webhook-ids")
		all, _, _ := sink.received()
		assert.Subset(t, all, got, "the webhook-ids endpoint 1 got from the fan-out")
		out, errOut, code = cli(t, env, "deliveries", "--endpoint", "2", "--json")
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, 2, strings.Count(out, `"webhook_id"`), "one delivery per event: %s", out)
		_, errOut, code = cli(t, env, "endpoints", "remove", "2")
		require.Equal(t, 0, code, errOut)
	})

	t.Run("admin API", func(t *testing.T) {
		var eps struct {
			Endpoints []struct {
				ID    int64  `json:"id"`
				State string `json:"state"`
			} `json:"endpoints"`
		}
		getJSON(t, srv.AdminToken(t), admin+"/api/admin/endpoints", &eps)
		require.Len(t, eps.Endpoints, 1)
		status, body := httpDo(t, srv.AdminToken(t), http.MethodPost, admin+"/api/admin/endpoints/1/replay",
			fmt.Sprintf(`{"from":%q,"to":%q,"dry_run":true}`, from, to))
		require.Equal(t, http.StatusOK, status, body)
		assert.Contains(t, body, `"total":3`, "relay-a's create and cancel, relay-b's create")
		status, body = httpDo(t, srv.AdminToken(t), http.MethodPost, admin+"/api/admin/endpoints/1/disable", "")
		require.Equal(t, http.StatusOK, status, body)
		assert.Contains(t, body, `"state":"disabled"`)
		status, body = httpDo(t, srv.AdminToken(t), http.MethodPost, admin+"/api/admin/endpoints/1/replay", fmt.Sprintf(`{"from":%q,"to":%q}`, from, to))
		assert.Equal(t, http.StatusBadRequest, status, body, "a disabled endpoint is not replayed")
		status, body = httpDo(t, srv.AdminToken(t), http.MethodPost, admin+"/api/admin/endpoints/1/enable", "")
		require.Equal(t, http.StatusOK, status, body)
		status, body = httpDo(t, srv.AdminToken(t), http.MethodPost, admin+"/api/admin/endpoints/1/rotate-secret", "")
		require.Equal(t, http.StatusOK, status, body)
		assert.Contains(t, body, `"secret":"whsec_`)
		status, body = httpDo(t, srv.AdminToken(t), http.MethodGet, admin+"/api/admin/endpoints/7", "")
		assert.Equal(t, http.StatusNotFound, status, body)
		status, body = httpDo(t, srv.AdminToken(t), http.MethodDelete, admin+"/api/admin/endpoints/1", "")
		assert.Equal(t, http.StatusNoContent, status, body)
	})
	srv.Stop(t)
}

func TestRelayEndToEnd(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	relayEndToEnd(t, map[string]string{"BOOKINGLEDGER_DATABASE_URL": servetest.NewDatabaseURL(t)})
}

// TestRelayEndToEndWithEventStoreDB: the same with the events in EventStoreDB.
func TestRelayEndToEndWithEventStoreDB(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	es := esdbtest.New(t)
	relayEndToEnd(t, map[string]string{
		"BOOKINGLEDGER_DATABASE_URL": servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_EVENT_STORE":  es.ConnString(),
	})
}

// endpoints update changes what it is given and keeps the rest; its URL is checked as add's is, and
// bad input is a usage error (exit 2) before the database is touched.
func TestEndpointsUpdateChangesWhatItIsGiven(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	vars := map[string]string{"BOOKINGLEDGER_DATABASE_URL": servetest.NewDatabaseURL(t), envRelayAllowPrivate: "true"}
	env := envOf(vars)
	out, errOut, code := cli(t, env, "endpoints", "add", "--url", "http://127.0.0.1:9/old", "--description", "crm", "--types", "booking.scheduled.*")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "endpoint 1 added")

	cases := []struct {
		name string
		args []string
		out  string
		want map[string]any // the endpoint afterwards, as endpoints list --json shows it
	}{
		{"url only", []string{"--url", "http://127.0.0.1:10/new"}, "endpoint 1 updated: http://127.0.0.1:10/new (types: booking.scheduled.*)",
			map[string]any{"url": "http://127.0.0.1:10/new", "description": "crm", "types": []any{"booking.scheduled.*"}}},
		{"description and types", []string{"--description", "billing", "--types", "booking.canceled.*,booking.payment_*"},
			"endpoint 1 updated: http://127.0.0.1:10/new (types: booking.canceled.*,booking.payment_*)",
			map[string]any{"url": "http://127.0.0.1:10/new", "description": "billing", "types": []any{"booking.canceled.*", "booking.payment_*"}}},
		{"empty types is every type", []string{"--types", ""}, "endpoint 1 updated: http://127.0.0.1:10/new (types: all)",
			map[string]any{"url": "http://127.0.0.1:10/new", "description": "billing", "types": []any{}, "filter": ""}},
		{"delivery settings", []string{"--ordered", "--rate", "20", "--concurrency", "2", "--breaker-failures", "0", "--disable-after", "48h"},
			"endpoint 1 updated: http://127.0.0.1:10/new (types: all)\ndelivery: ordered, rate 20/s, concurrency 2, no breaker, disable after 48h0m0s",
			map[string]any{"ordered": true, "rate_per_second": 20.0, "concurrency": 2.0, "breaker_failures": 0.0, "disable_after": "48h0m0s",
				"breaker": "off", "description": "billing"}},
		{"ordered off, the others kept", []string{"--ordered=false"},
			"endpoint 1 updated: http://127.0.0.1:10/new (types: all)\ndelivery: unordered, rate 20/s, concurrency 2, no breaker, disable after 48h0m0s",
			map[string]any{"ordered": false, "rate_per_second": 20.0, "concurrency": 2.0}},
		{"a filter", []string{"--filter", "status=active, provider=calcom|acuity"},
			"endpoint 1 updated: http://127.0.0.1:10/new (types: all; filter: provider=calcom|acuity,status=active)",
			map[string]any{"types": []any{}, "filter": "provider=calcom|acuity,status=active"}},
		{"the filter from its variable", []string{"--description", "billing"}, // BOOKINGLEDGER_ENDPOINT_FILTER is set below
			"endpoint 1 updated: http://127.0.0.1:10/new (types: all; filter: resource=room-a)",
			map[string]any{"filter": "resource=room-a"}},
		{"an empty filter is none", []string{"--filter", ""}, "endpoint 1 updated: http://127.0.0.1:10/new (types: all)",
			map[string]any{"filter": ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := env
			if c.name == "the filter from its variable" {
				v := maps.Clone(vars)
				v["BOOKINGLEDGER_ENDPOINT_FILTER"] = "resource=room-a"
				env = envOf(v)
			}
			out, errOut, code := cli(t, env, append([]string{"endpoints", "update", "1"}, c.args...)...)
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, c.out+"\n", out)
			out, errOut, code = cli(t, env, "endpoints", "list", "--json")
			require.Equal(t, 0, code, errOut)
			var list struct {
				Endpoints []map[string]any `json:"endpoints"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &list))
			require.Len(t, list.Endpoints, 1)
			for k, v := range c.want {
				assert.Equal(t, v, list.Endpoints[0][k], k)
			}
		})
	}

	failures := []struct {
		name   string
		vars   map[string]string
		args   []string
		code   int
		errOut string
	}{
		{"nothing to change", nil, []string{"1"}, 2, "endpoints update: nothing to change; give --url, --types, --filter, --description or a delivery setting"},
		{"unknown filter key", nil, []string{"1", "--filter", "colour=red"}, 2, `endpoints update: --filter: invalid filter: unknown key "colour" (keys: provider, resource, status)`},
		{"unknown status", nil, []string{"1", "--filter", "status=scheduled"}, 2, `endpoints update: --filter: invalid filter: status "scheduled": want one of requested, active, canceled, rejected`},
		{"no id", nil, []string{"--url", "http://127.0.0.1:9/x"}, 2, "endpoints update wants one endpoint id"},
		{"bad id", nil, []string{"x", "--url", "http://127.0.0.1:9/x"}, 2, `endpoints update: "x" is not an endpoint id`},
		{"empty url", nil, []string{"1", "--url", ""}, 2, "endpoints update: --url cannot be empty"},
		{"bad types", nil, []string{"1", "--types", "Bad Type"}, 2, "endpoints update: --types:"},
		{"unknown endpoint", nil, []string{"7", "--description", "x"}, 1, "endpoint 7: not found"},
		{"not http", nil, []string{"1", "--url", "ftp://example.com/"}, 1, "endpoints update:"},
		{"private without the setting", map[string]string{envRelayAllowPrivate: ""}, []string{"1", "--url", "http://127.0.0.1:11/x"}, 1, "not a public address"},
	}
	for _, c := range failures {
		t.Run(c.name, func(t *testing.T) {
			v := maps.Clone(vars)
			maps.Copy(v, c.vars)
			_, errOut, code := cli(t, envOf(v), append([]string{"endpoints", "update"}, c.args...)...)
			assert.Equal(t, c.code, code, errOut)
			assert.Contains(t, errOut, c.errOut)
		})
	}
	out, _, _ = cli(t, env, "endpoints", "list")
	assert.Contains(t, out, "http://127.0.0.1:10/new", "a refused update changes nothing")
}
