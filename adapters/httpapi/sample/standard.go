package sample

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"bookingledger/adapters/providers/standard"
)

func standardKind() kind {
	return kind{
		events: []string{standard.TypeScheduled, standard.TypeCanceled},
		body:   standardBody,
		sign: func(secret string, body []byte, now time.Time) (http.Header, error) {
			id := StandardWebhookID(body)
			sig, err := standard.Sign(secret, id, now, body)
			if err != nil {
				return nil, err
			}
			h := http.Header{}
			h.Set(standard.HeaderID, id)
			h.Set(standard.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
			h.Set(standard.HeaderSignature, sig)
			return h, nil
		},
	}
}

// StandardWebhookID is the webhook-id a sample sends with body. A sender keeps the id of a message
// across retries; deriving it from the body does the same for every resend of one sample (and of one
// --raw file), and gives different messages different ids.
func StandardWebhookID(body []byte) string {
	sum := sha256.Sum256(body)
	return "msg_" + hex.EncodeToString(sum[:12])
}

// standardBody is the recommended {type, timestamp, data} message. Scheduled 7 days before the start,
// canceled 6 days before.
func standardBody(event string, p Params) (any, error) {
	data := map[string]any{"booking": p.Booking}
	at := p.Start.Add(-7 * 24 * time.Hour).Add(250 * time.Millisecond)
	switch event {
	case standard.TypeScheduled:
		data["meeting"] = "rooms.example.com/sessions/" + p.Booking
		data["resources"] = []string{"rooms.example.com/staff/" + p.Host}
		data["start"] = p.Start.Format(time.RFC3339)
		data["end"] = p.End.Format(time.RFC3339)
		data["capacity"] = 1
	case standard.TypeCanceled:
		at = p.Start.Add(-6 * 24 * time.Hour)
		data["reason"] = "Instructor unwell"
		data["canceled_by"] = "provider"
	}
	return map[string]any{
		"type":      event,
		"timestamp": at.Format(millis),
		"data":      data,
	}, nil
}
