package resourceapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi/resourceapi"
	"bookingledger/adapters/memstore"
	"bookingledger/domain/resource"
)

var at = time.Date(2030, 1, 7, 9, 0, 0, 0, time.FixedZone("CET", 3600))

// api serves the handlers over links, with the actor named by the X-Actor header and the clock at.
func api(t *testing.T, links resourceapi.Links) *httptest.Server {
	return apiWithClock(t, links, func() time.Time { return at })
}

func apiWithClock(t *testing.T, links resourceapi.Links, now func() time.Time) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	resourceapi.Register(mux, resourceapi.Deps{
		Links: links,
		Actor: func(r *http.Request) string { return r.Header.Get("X-Actor") },
		Now:   now,
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// call sends a request as ops and answers the status and the body.
func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Actor", "ops")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	return resp.StatusCode, string(b)
}

func newLinks() *resource.Service { return resource.NewService(memstore.New(), eventcodec.JSON{}) }

// TestChangesAnswerTheResourceAfterThem: a link answers the name's provider resources after it and
// the event it appended, dated by the clock in UTC and by the request's actor; the same link again
// appends nothing; an unlink with no body takes every identifier; the list and a name's history
// follow, and another name's events are not in its history.
func TestChangesAnswerTheResourceAfterThem(t *testing.T) {
	srv := api(t, newLinks())
	status, body := call(t, srv, http.MethodPost, "/api/admin/resources/dr-smith/link", `{"provider_resources":["cal-b","cal-a","cal-b"]}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"name":"dr-smith","provider_resources":["cal-a","cal-b"],"appended":[
		{"event_id":"`+eventID(t, body)+`","type":"resource.linked.v1","name":"dr-smith","provider_resources":["cal-a","cal-b"],"by":"ops","at":"2030-01-07T08:00:00Z"}]}`, body)

	status, body = call(t, srv, http.MethodPost, "/api/admin/resources/dr-smith/link", `{"provider_resources":["cal-a"]}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"name":"dr-smith","provider_resources":["cal-a","cal-b"],"appended":[]}`, body, "linked already: nothing appended")

	status, body = call(t, srv, http.MethodPost, "/api/admin/resources/dr-jones/link", `{"provider_resources":["cal-c"]}`)
	require.Equal(t, http.StatusOK, status, body)
	status, body = call(t, srv, http.MethodGet, "/api/admin/resources", "")
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"resources":[{"name":"dr-jones","provider_resources":["cal-c"]},{"name":"dr-smith","provider_resources":["cal-a","cal-b"]}],"version":2}`, body)

	status, body = call(t, srv, http.MethodPost, "/api/admin/resources/dr-smith/unlink", "")
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"name":"dr-smith","provider_resources":[],"appended":[
		{"event_id":"`+eventID(t, body)+`","type":"resource.unlinked.v1","name":"dr-smith","provider_resources":["cal-a","cal-b"],"by":"ops","at":"2030-01-07T08:00:00Z"}]}`, body)

	status, body = call(t, srv, http.MethodGet, "/api/admin/resources/dr-smith", "")
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, 2, strings.Count(body, `"event_id"`), "dr-smith's link and unlink, not dr-jones's link: %s", body)
	assert.Contains(t, body, `"provider_resources":[]`, "a name with no identifiers left still shows, with its history")
	status, body = call(t, srv, http.MethodGet, "/api/admin/resources", "")
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"resources":[{"name":"dr-jones","provider_resources":["cal-c"]}],"version":3}`, body)
}

// TestChangesWithoutAClockAreDatedNow: with no clock given, a change is dated by the wall clock.
func TestChangesWithoutAClockAreDatedNow(t *testing.T) {
	links := newLinks()
	srv := apiWithClock(t, links, nil)
	before := time.Now()
	status, body := call(t, srv, http.MethodPost, "/api/admin/resources/dr-smith/link", `{"provider_resources":["cal-a"]}`)
	require.Equal(t, http.StatusOK, status, body)
	_, evs, err := links.Load(context.Background())
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.WithinRange(t, evs[0].At, before.Add(-time.Second), time.Now().Add(time.Second))
}

// eventID is the event_id of the one appended event in a change's answer.
func eventID(t *testing.T, body string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `"event_id":"`)
	require.True(t, ok, body)
	id, _, _ := strings.Cut(rest, `"`)
	return id
}

// TestRefusalsAreSpecific: each refusal has its status and code, and appends nothing.
func TestRefusalsAreSpecific(t *testing.T) {
	srv := api(t, newLinks())
	status, body := call(t, srv, http.MethodPost, "/api/admin/resources/dr-smith/link", `{"provider_resources":["cal-a"]}`)
	require.Equal(t, http.StatusOK, status, body)

	for _, c := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"an unknown field", http.MethodPost, "/api/admin/resources/dr-smith/link", `{"provider_resources":["cal-z"],"resources":["x"]}`, http.StatusBadRequest, "invalid_request"},
		{"not JSON", http.MethodPost, "/api/admin/resources/dr-smith/link", `provider_resources=x`, http.StatusBadRequest, "invalid_request"},
		{"a link of nothing", http.MethodPost, "/api/admin/resources/dr-smith/link", ``, http.StatusBadRequest, "invalid_request"},
		{"a malformed name", http.MethodPost, "/api/admin/resources/dr%20who/link", `{"provider_resources":["cal-z"]}`, http.StatusBadRequest, "invalid_request"},
		{"linked elsewhere", http.MethodPost, "/api/admin/resources/dr-jones/link", `{"provider_resources":["cal-a"]}`, http.StatusConflict, "linked_elsewhere"},
		{"unlink of another's", http.MethodPost, "/api/admin/resources/dr-smith/unlink", `{"provider_resources":["cal-q"]}`, http.StatusBadRequest, "invalid_request"},
		{"unlink of a name never linked", http.MethodPost, "/api/admin/resources/nobody/unlink", ``, http.StatusNotFound, "not_found"},
		{"show of a name never linked", http.MethodGet, "/api/admin/resources/nobody", ``, http.StatusNotFound, "not_found"},
		{"a body over 64 KiB", http.MethodPost, "/api/admin/resources/dr-smith/link", `{"provider_resources":["` + strings.Repeat("x", 64<<10) + `"]}`, http.StatusRequestEntityTooLarge, "body_too_large"},
		{"a second object after the first", http.MethodPost, "/api/admin/resources/dr-smith/link", `{"provider_resources":["cal-z"]} {"provider_resources":["cal-y"]}`, http.StatusBadRequest, "invalid_request"},
	} {
		status, body := call(t, srv, c.method, c.path, c.body)
		assert.Equal(t, c.status, status, "%s: %s", c.name, body)
		assert.Contains(t, body, `"code":"`+c.code+`"`, c.name)
	}
	status, body = call(t, srv, http.MethodGet, "/api/admin/resources", "")
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"resources":[{"name":"dr-smith","provider_resources":["cal-a"]}],"version":1}`, body, "no refusal appended anything")
}

// failingLinks answers every call with err.
type failingLinks struct{ err error }

func (f failingLinks) Load(context.Context) (resource.State, []resource.Event, error) {
	return resource.State{}, nil, f.err
}

func (f failingLinks) Link(context.Context, string, []string, string, time.Time) ([]resource.Event, error) {
	return nil, f.err
}

func (f failingLinks) Unlink(context.Context, string, []string, string, time.Time) ([]resource.Event, error) {
	return nil, f.err
}

// TestStoreFailures: a store that timed out is a 503 timeout; any other failure a 500 that says
// nothing of it.
func TestStoreFailures(t *testing.T) {
	slow := api(t, failingLinks{context.DeadlineExceeded})
	status, body := call(t, slow, http.MethodGet, "/api/admin/resources", "")
	assert.Equal(t, http.StatusServiceUnavailable, status, body)
	assert.Contains(t, body, `"code":"timeout"`)

	broken := api(t, failingLinks{errors.New("connection to 10.0.0.7 refused")})
	status, body = call(t, broken, http.MethodPost, "/api/admin/resources/dr-smith/link", `{"provider_resources":["cal-a"]}`)
	assert.Equal(t, http.StatusInternalServerError, status, body)
	assert.JSONEq(t, `{"error":"internal error","code":"internal"}`, body)
}
