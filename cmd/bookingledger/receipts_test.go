package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/postgres/pgtest"
)

// A quarantined delivery can be inspected: receipts list finds it by outcome and provider, receipts
// show prints its reason, body and the other receipts of the delivery, the read API answers the same,
// and reconcile list points there.
func TestReceiptsListAndShowAQuarantinedDelivery(t *testing.T) {
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          pgtest.NewEmptyDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
	})
	srv := startServe(t, env)
	send(t, env, srv.base, "calendly", "invitee.created", "--booking", "fine")
	raw := filepath.Join(t.TempDir(), "broken.json")
	const broken = `{"event":"invitee.created","payload":{"uri":42}}`
	require.NoError(t, os.WriteFile(raw, []byte(broken), 0o600))
	out := send(t, env, srv.base, "calendly", "--raw", raw)
	require.Contains(t, out, `"status":"quarantined"`)
	out = send(t, env, srv.base, "calendly", "--raw", raw) // the same body again
	require.Contains(t, out, `"status":"quarantined"`)

	stdout, stderr, code := cli(t, env, "receipts", "list", "--outcome", "quarantined", "--provider", "calendly")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "receipts (2, newest first)")
	assert.Contains(t, stdout, "quarantined")
	assert.NotContains(t, stdout, "accepted")

	stdout, stderr, code = cli(t, env, "receipts", "list", "--json", "--outcome", "quarantined")
	require.Equal(t, 0, code, stderr)
	var list readapi.ReceiptsDTO
	require.NoError(t, json.Unmarshal([]byte(stdout), &list))
	require.Len(t, list.Receipts, 2)
	_, httpList := httpDo(t, srv.token, http.MethodGet, srv.admin+"/api/receipts?outcome=quarantined", "")
	assert.JSONEq(t, httpList, stdout, "receipts list --json is the HTTP answer")
	first, second := list.Receipts[1], list.Receipts[0] // newest first

	stdout, stderr, code = cli(t, env, "receipts", "show", fmt.Sprint(first.ID))
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{fmt.Sprintf("receipt #%d: calendly", first.ID), "outcome:   quarantined", "reason:", broken,
		"what became of the delivery (1 other receipt(s))", fmt.Sprintf("#%d", second.ID)} {
		assert.Contains(t, stdout, want)
	}
	var detail readapi.ReceiptDetailDTO
	getJSON(t, srv.token, fmt.Sprintf("%s/api/receipts/%d", srv.admin, first.ID), &detail)
	require.NotNil(t, detail.Body)
	assert.Equal(t, broken, *detail.Body)
	require.Len(t, detail.Related, 1)
	assert.Equal(t, second.ID, detail.Related[0].ID)

	status, body := httpDo(t, srv.token, http.MethodGet, srv.admin+"/api/receipts/999999", "")
	assert.Equal(t, http.StatusNotFound, status, body)
	status, body = httpDo(t, srv.token, http.MethodGet, srv.admin+"/api/receipts?outcome=lost", "")
	assert.Equal(t, http.StatusBadRequest, status, body)
	assert.Contains(t, body, "invalid_request")
	_, stderr, code = cli(t, env, "receipts", "list", "--outcome", "lost")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `outcome "lost" is not one of`)
	_, stderr, code = cli(t, env, "receipts", "show", "999999")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no receipt 999999")

	stdout, stderr, code = cli(t, env, "reconcile", "list")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "bookingledger receipts list --outcome quarantined")
}
