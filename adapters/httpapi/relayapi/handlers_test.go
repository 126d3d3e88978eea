package relayapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/relayapi"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/relay"
)

func TestAdminRoutesAnswerWithTheirStatusesAndCodes(t *testing.T) {
	do := serveAdmin(t, newRelay(t))
	cases := []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/api/admin/endpoints", `{"url":"http://127.0.0.1:9/x"}`, http.StatusUnprocessableEntity, "private_target"},
		{"POST", "/api/admin/endpoints", `{"url":"ftp://example.com/"}`, http.StatusBadRequest, "invalid_url"},
		{"POST", "/api/admin/endpoints", `{"url":"https://93.184.215.14/","types":["Bad Type"]}`, http.StatusBadRequest, "invalid_types"},
		{"POST", "/api/admin/endpoints", `{"url":"https://93.184.215.14/","filter":"status=scheduled"}`, http.StatusBadRequest, "invalid_filter"},
		{"POST", "/api/admin/endpoints", `{"url":"https://93.184.215.14/","extra":1}`, http.StatusBadRequest, "invalid_request"},
		{"POST", "/api/admin/endpoints", `{}`, http.StatusBadRequest, "invalid_request"},
		{"POST", "/api/admin/endpoints", `{"url":"` + strings.Repeat("a", 70<<10) + `"}`, http.StatusRequestEntityTooLarge, "body_too_large"},
		{"GET", "/api/admin/endpoints/9", "", http.StatusNotFound, "not_found"},
		{"GET", "/api/admin/endpoints/x", "", http.StatusBadRequest, "invalid_request"},
		{"DELETE", "/api/admin/endpoints/9", "", http.StatusNotFound, "not_found"},
		{"POST", "/api/admin/endpoints/9/enable", "", http.StatusNotFound, "not_found"},
		{"POST", "/api/admin/endpoints/9/replay", `{"from":"2027-01-02T00:00:00Z","to":"2027-01-01T00:00:00Z"}`, http.StatusBadRequest, "invalid_request"},
		{"GET", "/api/admin/deliveries?state=lost", "", http.StatusBadRequest, "invalid_request"},
		{"GET", "/api/admin/deliveries?limit=0", "", http.StatusBadRequest, "invalid_request"},
		{"GET", "/api/admin/deliveries?limit=1001", "", http.StatusBadRequest, "invalid_request"},
		{"GET", "/api/admin/deliveries?endpoint=0", "", http.StatusBadRequest, "invalid_request"},
		{"GET", "/api/admin/deliveries?endpoint=x", "", http.StatusBadRequest, "invalid_request"},
		{"GET", "/api/admin/alerts?endpoint=0", "", http.StatusBadRequest, "invalid_request"},
		{"POST", "/api/admin/endpoints", `{"url":"https://93.184.215.14/"}{"url":"https://93.184.215.14/"}`, http.StatusBadRequest, "invalid_request"},
		{"GET", "/api/admin/replays/4", "", http.StatusNotFound, "not_found"},
		{"POST", "/api/admin/deliveries/4/retry", "", http.StatusNotFound, "not_found"},
		{"POST", "/api/admin/deliveries/0/retry", "", http.StatusBadRequest, "invalid_request"},
		{"GET", "/api/bookings/has%20space/deliveries", "", http.StatusBadRequest, "invalid_request"},
		{"PATCH", "/api/admin/endpoints/9", `{"description":"x"}`, http.StatusNotFound, "not_found"},
		{"PATCH", "/api/admin/endpoints/x", `{"description":"x"}`, http.StatusBadRequest, "invalid_request"},
	}
	for _, c := range cases {
		status, body := do(c.method, c.path, c.body)
		assert.Equal(t, c.status, status, "%s %s: %s", c.method, c.path, body)
		var e relayapi.ErrorDTO
		if assert.NoError(t, json.Unmarshal([]byte(body), &e), body) {
			assert.Equal(t, c.code, e.Code, "%s %s", c.method, c.path)
		}
	}

	status, body := do("POST", "/api/admin/endpoints", `{"url":"https://93.184.215.14/hook","types":["booking.canceled.*"],"description":"crm"}`)
	require.Equal(t, http.StatusCreated, status, body)
	var added relayapi.EndpointSecretDTO
	require.NoError(t, json.Unmarshal([]byte(body), &added))
	assert.True(t, strings.HasPrefix(added.Secret, "whsec_"))
	assert.Equal(t, []string{"booking.canceled.*"}, added.Endpoint.Types)
	status, body = do("GET", "/api/admin/endpoints", "")
	require.Equal(t, http.StatusOK, status)
	assert.NotContains(t, body, added.Secret, "listings never show the secret")
	status, body = do("POST", "/api/admin/endpoints/1/replay", `{"from":"2027-01-01T00:00:00Z","to":"2027-01-02T00:00:00Z","dry_run":true}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"total":0,"by_type":[],"rate":250,"duration_seconds":0}`, body)
	status, body = do("POST", "/api/admin/endpoints/1/replay", `{"from":"2027-01-01T00:00:00Z","to":"2027-01-02T00:00:00Z","dry_run":true,"rate":-1}`)
	assert.Equal(t, http.StatusBadRequest, status, body)
	assert.Contains(t, body, `"code":"invalid_rate"`)
	status, _ = do("GET", "/api/bookings/calendly-x/deliveries", "")
	assert.Equal(t, http.StatusOK, status)
}

// recordingRelay is the relay the handlers get, remembering the delivery queries they make. A retry
// answers as a retried dead delivery would: the test has no dead delivery to retry.
type recordingRelay struct {
	*relay.Relay
	mu      sync.Mutex
	queries []relay.DeliveryQuery
}

func (r *recordingRelay) Deliveries(ctx context.Context, q relay.DeliveryQuery) ([]relay.Delivery, error) {
	r.mu.Lock()
	r.queries = append(r.queries, q)
	r.mu.Unlock()
	return r.Relay.Deliveries(ctx, q)
}

func (r *recordingRelay) lastQuery() relay.DeliveryQuery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queries[len(r.queries)-1]
}

func (r *recordingRelay) RetryDelivery(_ context.Context, id int64) (relay.Replay, error) {
	return relay.Replay{ID: 40 + id, EndpointID: 1, Total: 1, Pending: 1}, nil
}

func TestAdminRoutesPassTheirParametersAndAnswerTheDocumentedStatuses(t *testing.T) {
	rec := &recordingRelay{Relay: newRelay(t)}
	do := serveAdmin(t, rec)

	status, body := do("POST", "/api/admin/endpoints", `{"url":"https://93.184.215.14/hook","description":"crm"}`)
	require.Equal(t, http.StatusCreated, status, body)
	var added relayapi.EndpointSecretDTO
	require.NoError(t, json.Unmarshal([]byte(body), &added))
	assert.Equal(t, "crm", added.Endpoint.Description)
	id := fmt.Sprint(added.Endpoint.ID)

	status, body = do("GET", "/api/admin/deliveries?endpoint="+id+"&state=dead&limit=7", "")
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, relay.DeliveryQuery{EndpointID: added.Endpoint.ID, State: "dead", Limit: 7}, rec.lastQuery())
	status, body = do("GET", "/api/bookings/calendly-x/deliveries", "")
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, relay.DeliveryQuery{Booking: "calendly-x", Limit: 1000}, rec.lastQuery(), "a booking's deliveries, all of them")

	for _, c := range []struct {
		body, code string
		status     int
	}{
		{`{}`, "invalid_request", http.StatusBadRequest},
		{`{"url":"http://127.0.0.1:9/x"}`, "private_target", http.StatusUnprocessableEntity},
		{`{"url":"ftp://example.com/"}`, "invalid_url", http.StatusBadRequest},
		{`{"types":["Bad Type"]}`, "invalid_types", http.StatusBadRequest},
		{`{"filter":"colour=red"}`, "invalid_filter", http.StatusBadRequest},
		{`{"secret":"whsec_x"}`, "invalid_request", http.StatusBadRequest},
	} {
		status, body = do("PATCH", "/api/admin/endpoints/"+id, c.body)
		assert.Equal(t, c.status, status, "%s: %s", c.body, body)
		assert.Contains(t, body, `"code":"`+c.code+`"`, c.body)
	}
	status, body = do("PATCH", "/api/admin/endpoints/"+id, `{"url":"https://93.184.215.15/moved","types":[]}`)
	require.Equal(t, http.StatusOK, status, body)
	var moved relayapi.EndpointDTO
	require.NoError(t, json.Unmarshal([]byte(body), &moved))
	assert.Equal(t, "https://93.184.215.15/moved", moved.URL)
	assert.Equal(t, []string{}, moved.Types, "[] is every type")
	assert.Equal(t, "crm", moved.Description, "not given: kept")

	status, body = do("POST", "/api/admin/endpoints/"+id+"/disable", "")
	require.Equal(t, http.StatusOK, status, body)
	var ep relayapi.EndpointDTO
	require.NoError(t, json.Unmarshal([]byte(body), &ep))
	assert.Equal(t, "disabled", ep.State)
	assert.Equal(t, "disabled by an operator", ep.DisabledReason)
	status, body = do("POST", "/api/admin/endpoints/"+id+"/enable", "")
	require.Equal(t, http.StatusOK, status, body)

	window := `"from":"2027-01-01T00:00:00Z","to":"2027-01-02T00:00:00Z"`
	status, body = do("POST", "/api/admin/endpoints/"+id+"/replay", `{`+window+`,"types":["Bad Type"],"dry_run":true}`)
	assert.Equal(t, http.StatusBadRequest, status, "the types narrow the replay, so they are checked: %s", body)
	assert.Contains(t, body, `"code":"invalid_types"`)
	status, body = do("POST", "/api/admin/endpoints/"+id+"/replay", `{`+window+`}`)
	require.Equal(t, http.StatusAccepted, status, "a replay started: %s", body)
	var started relayapi.ReplayStartedDTO
	require.NoError(t, json.Unmarshal([]byte(body), &started))
	assert.Equal(t, added.Endpoint.ID, started.Replay.Endpoint)
	assert.Positive(t, started.Replay.ID)

	status, body = do("POST", "/api/admin/deliveries/2/retry", "")
	require.Equal(t, http.StatusAccepted, status, body)
	assert.Contains(t, body, `"id":42`)

	status, body = do("DELETE", "/api/admin/endpoints/"+id, "")
	assert.Equal(t, http.StatusNoContent, status, body)
	assert.Empty(t, body)
	status, _ = do("GET", "/api/admin/endpoints/"+id, "")
	assert.Equal(t, http.StatusNotFound, status)

	long := strings.Repeat("7", 40) + "x"
	status, body = do("GET", "/api/admin/endpoints/"+long, "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, strings.Repeat("7", 32)+"…", "a long id is quoted cut")
	assert.NotContains(t, body, long)
}

func TestAnEndpointShowsItsPreviousSecretOnlyWhileItSigns(t *testing.T) {
	signing := relayapi.ToEndpoint(relay.Endpoint{ID: 1, PreviousUntil: time.Now().Add(time.Hour)})
	require.NotNil(t, signing.PreviousSecretUntil)
	assert.Nil(t, relayapi.ToEndpoint(relay.Endpoint{ID: 1, PreviousUntil: time.Now().Add(-time.Hour)}).PreviousSecretUntil,
		"the previous secret stopped signing an hour ago")
	assert.Nil(t, relayapi.ToEndpoint(relay.Endpoint{ID: 1}).PreviousSecretUntil, "never rotated")
}

// newRelay is a relay over a new database.
func newRelay(t *testing.T) *relay.Relay {
	t.Helper()
	pool := pgtest.NewDatabase(t)
	r, err := relay.New(relay.Config{Pool: pool, Events: postgres.NewStore(pool)})
	require.NoError(t, err)
	return r
}

// serveAdmin serves the relay's admin routes over a; do sends one request and answers its status and
// body.
func serveAdmin(t *testing.T, a relayapi.Admin) (do func(method, path, body string) (int, string)) {
	t.Helper()
	mux := http.NewServeMux()
	relayapi.Register(mux, relayapi.Deps{Relay: a})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return func(method, path, body string) (int, string) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}
