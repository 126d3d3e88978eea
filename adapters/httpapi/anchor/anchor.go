// Package anchor is the baseline of the ingest benchmarks, not product code: the dedupe-table webhook
// handler that articles on webhook idempotency recommend, which is what a user would write instead of
// adopting bookingledger. BenchmarkIngestVsHandwritten (adapters/httpapi) serves it in process;
// BenchmarkServeVsHandwritten (cmd/bookingledger) runs it as a process of its own over HTTP against
// `bookingledger serve`. docs/benchmarks.md, "Ingest against the hand-written handler".
package anchor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/providers/calendly"
)

// Schema is the handler's two tables: the dedupe table and the bookings under a unique active slot.
const Schema = `
CREATE TABLE IF NOT EXISTS processed_bookings (
    booking_uri text NOT NULL,
    event_type text NOT NULL,
    occurred_at timestamptz NOT NULL,
    PRIMARY KEY (booking_uri, event_type)
);
CREATE TABLE IF NOT EXISTS hw_bookings (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    booking_uri text NOT NULL,
    resource_id text NOT NULL,
    starts_at timestamptz NOT NULL,
    ends_at timestamptz NOT NULL,
    status text NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS hw_bookings_slot ON hw_bookings (resource_id, starts_at) WHERE status = 'active';`

// Handler verifies the Calendly signature over "t.body" (180 s tolerance), parses the body, and in one
// transaction records the delivery in processed_bookings (ON CONFLICT DO NOTHING) and, if that
// inserted, the booking under a unique active slot; 200 after the commit. Mount it where the body
// arrives (it does not look at the path).
type Handler struct {
	Pool *pgxpool.Pool
	Key  []byte
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "body", http.StatusBadRequest)
		return
	}
	var t, v1 string
	for _, part := range strings.Split(r.Header.Get(calendly.SignatureHeader), ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			t = v
		case "v1":
			v1 = v
		}
	}
	sec, err := strconv.ParseInt(t, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 180*time.Second {
		http.Error(w, "stale", http.StatusUnauthorized)
		return
	}
	mac := hmac.New(sha256.New, h.Key)
	mac.Write([]byte(t + "."))
	mac.Write(body)
	got, err := hex.DecodeString(v1)
	if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		http.Error(w, "signature", http.StatusUnauthorized)
		return
	}
	var p struct {
		Event   string `json:"event"`
		Payload struct {
			URI            string    `json:"uri"`
			CreatedAt      time.Time `json:"created_at"`
			ScheduledEvent struct {
				Start       time.Time `json:"start_time"`
				End         time.Time `json:"end_time"`
				Memberships []struct {
					User string `json:"user"`
				} `json:"event_memberships"`
			} `json:"scheduled_event"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(body, &p); err != nil || len(p.Payload.ScheduledEvent.Memberships) == 0 {
		http.Error(w, "payload", http.StatusBadRequest)
		return
	}
	err = pgx.BeginFunc(r.Context(), h.Pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(r.Context(), `INSERT INTO processed_bookings (booking_uri, event_type, occurred_at)
VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, p.Payload.URI, p.Event, p.Payload.CreatedAt)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		ev := p.Payload.ScheduledEvent
		_, err = tx.Exec(r.Context(), `INSERT INTO hw_bookings (booking_uri, resource_id, starts_at, ends_at, status)
VALUES ($1, $2, $3, $4, 'active')`, p.Payload.URI, ev.Memberships[0].User, ev.Start, ev.End)
		return err
	})
	if err != nil {
		http.Error(w, "store", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}
