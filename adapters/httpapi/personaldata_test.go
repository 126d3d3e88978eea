package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
)

// personalForms are the byte forms a text can take in storage: as is, JSON-escaped and base64.
func personalForms(s string) [][]byte {
	escaped, _ := json.Marshal(s)
	return [][]byte{[]byte(s), escaped[1 : len(escaped)-1], []byte(base64.StdEncoding.EncodeToString([]byte(s))),
		[]byte(base64.RawURLEncoding.EncodeToString([]byte(s)))}
}

// TestNoEventHoldsPersonalData sends every sample of every provider whose body carries people's data,
// with each name, address and typed reason replaced by a marker of its own, and scans the bytes of
// every stored event — on the selected store, PostgreSQL or EventStoreDB — for any form of any
// marker. The reasons are kept, in the free-text table only.
func TestNoEventHoldsPersonalData(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	secrets := map[string]string{"calendly": calendlyKey, "calcom": calcomSecret, "stripe": stripeSecret, "standard": standardSecret}
	// What the samples carry that a person typed or is: replaced per delivery by markers.
	personal := []string{"Schedule conflict", "Something came up", "Fully booked that week", "Instructor unwell",
		"Ada Lovelace", "ada.lovelace@example.com", "Grace Hopper", "grace.hopper@example.com"}
	var markers, reasons []string
	n := 0
	for _, provider := range []string{"calendly", "calcom", "standard", "stripe"} {
		for _, event := range sample.Events(provider) {
			n++
			body, err := sample.Body(provider, event, sample.Params{Booking: fmt.Sprintf("pd-%d", n)})
			require.NoError(t, err)
			for i, p := range personal {
				if !bytes.Contains(body, []byte(p)) {
					continue
				}
				m := fmt.Sprintf("Zoë <mark-%d-%d> & co", n, i) // escaped differently by JSON
				if strings.Contains(p, "@") {
					m = fmt.Sprintf("zoe.mark-%d-%d@example.org", n, i)
				}
				body = bytes.ReplaceAll(body, []byte(p), []byte(m))
				markers = append(markers, m)
				if strings.Contains(p, " ") && !strings.Contains(p, "Lovelace") && !strings.Contains(p, "Hopper") {
					reasons = append(reasons, m)
				}
			}
			h, err := sample.Sign(provider, secrets[provider], body, ts.Clock.Now())
			require.NoError(t, err)
			r := ts.post(t, provider, h, body)
			require.Equal(t, http.StatusOK, r.Status, "%s %s: %s", provider, event, r.Body)
		}
	}
	require.Len(t, reasons, 4, "the calendly, calcom (cancel and rejection) and standard samples carry a typed reason")

	events := ts.allEvents(t)
	require.NotEmpty(t, events)
	for _, e := range events {
		for _, m := range markers {
			for _, form := range personalForms(m) {
				assert.False(t, bytes.Contains(e.Data, form) || bytes.Contains(e.Metadata, form),
					"event %s of %s (%s) holds personal data %q: %s", e.ID, e.StreamID, e.Type, form, e.Data)
			}
		}
	}
	for _, reason := range reasons {
		var field string
		require.NoError(t, ts.Pool.QueryRow(context.Background(), `SELECT field FROM free_texts WHERE text = $1`, reason).Scan(&field),
			"reason %q is kept apart", reason)
		assert.Contains(t, []string{"cancel_reason", "reject_reason"}, field)
	}
}
