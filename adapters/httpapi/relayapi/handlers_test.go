package relayapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/relayapi"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/relay"
)

func TestAdminRoutesAnswerWithTheirStatusesAndCodes(t *testing.T) {
	pool := pgtest.NewDatabase(t)
	r, err := relay.New(relay.Config{Pool: pool, Events: postgres.NewStore(pool)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	relayapi.Register(mux, relayapi.Deps{Relay: r})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	do := func(method, path, body string) (int, string) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cases := []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/api/admin/endpoints", `{"url":"http://127.0.0.1:9/x"}`, http.StatusUnprocessableEntity, "private_target"},
		{"POST", "/api/admin/endpoints", `{"url":"ftp://example.com/"}`, http.StatusBadRequest, "invalid_url"},
		{"POST", "/api/admin/endpoints", `{"url":"https://93.184.215.14/","types":["Bad Type"]}`, http.StatusBadRequest, "invalid_types"},
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
		{"GET", "/api/admin/replays/4", "", http.StatusNotFound, "not_found"},
		{"POST", "/api/admin/deliveries/4/retry", "", http.StatusNotFound, "not_found"},
		{"POST", "/api/admin/deliveries/0/retry", "", http.StatusBadRequest, "invalid_request"},
		{"GET", "/api/bookings/has%20space/deliveries", "", http.StatusBadRequest, "invalid_request"},
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
	assert.JSONEq(t, `{"total":0,"by_type":[]}`, body)
	status, _ = do("GET", "/api/bookings/calendly-x/deliveries", "")
	assert.Equal(t, http.StatusOK, status)
}
