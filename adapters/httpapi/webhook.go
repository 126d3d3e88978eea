package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"bookingledger/adapters/providers"
	"bookingledger/domain/ledger"
)

// Response is the body of every 2xx answer to a webhook.
type Response struct {
	Status ledger.Outcome `json:"status"`
	// Booking is the booking ID the read API takes (/api/bookings/{booking}); Stream is its event
	// stream ("booking-" + Booking), the name auditors see in the store.
	Booking string `json:"booking,omitempty"`
	Stream  string `json:"stream,omitempty"`
	EventID string `json:"event_id,omitempty"`
	// Reason says why a delivery was ignored, quarantined or deferred, or why its accepted events
	// were refused (Finding).
	Reason string `json:"reason,omitempty"`
	// Finding names how the booking's state refused the accepted events (booking.FindingCode:
	// after_terminal, superseded): they are kept in the stream but changed nothing.
	Finding string `json:"finding,omitempty"`
}

// ErrorResponse is the body of every non-2xx answer to a webhook.
type ErrorResponse struct {
	// Error is the reason in words ("signature does not match").
	Error string `json:"error"`
	// Code is the same reason as a stable token ("bad_signature"), also the metrics reason label.
	Code string `json:"code"`
}

// maxDeliveryIDBytes is far above any provider's identity (Token caps each part at 512 bytes); it only
// guards the receipts index against a pathological value.
const maxDeliveryIDBytes = 2048

func (s *Server) handleWebhook(w http.ResponseWriter, r *http.Request) {
	started := time.Now()
	name := r.PathValue("provider")
	p, ok := s.providers[name]
	if !ok {
		// No receipt: the provider label would be chosen by the caller, and no provider is configured
		// to own it. Counted under a fixed label.
		s.metrics.rejections.WithLabelValues(unknownProviderLabel, "unknown_provider").Inc()
		s.writeError(w, classify(ErrUnknownProvider))
		return
	}

	var body []byte
	var err error
	if r.ContentLength > s.maxBody {
		// Announced too large: refuse without reading a byte of it.
		err = &http.MaxBytesError{Limit: s.maxBody}
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	}
	receivedAt := s.clock()
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			err = fmt.Errorf("%w: more than %d bytes (Content-Length %d)", ErrBodyTooLarge, s.maxBody, r.ContentLength)
		} else if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			// The read deadline passed mid-body. The client may still read an answer before the
			// server closes the connection: 408 says what happened.
			err = fmt.Errorf("%w: %w", ErrBodyTimeout, err)
		} else {
			err = fmt.Errorf("%w: %w", ErrBodyUnreadable, err)
		}
		s.reject(r.Context(), w, name, r.Header, receivedAt, len(body), err)
		return
	}

	verified, err := p.Verify(r.Header, body, receivedAt)
	if err != nil {
		s.reject(r.Context(), w, name, r.Header, receivedAt, len(body), verificationError(err))
		return
	}

	// From here on the request is authentic: its body is kept, and only a failure to record it may
	// stop it from being acked — or a burst that recording cannot take now (admission).
	waitStart := time.Now()
	release, err := s.admit.acquire(r.Context())
	if s.admit.slots != nil {
		result := "admitted"
		if err != nil {
			result = "shed"
		}
		s.metrics.admissionWait.WithLabelValues(result).Observe(time.Since(waitStart).Seconds())
	}
	if err != nil {
		s.unavailable(w, name, started, err)
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), s.recordTO)
	defer cancel()
	mapped, mapErr := p.Map(ctx, r.Header, body, receivedAt)
	deliveryID := ledger.StorableText(mapped.DeliveryID, maxDeliveryIDBytes)
	if deliveryID == "" {
		deliveryID = bodyDigest(body)
	}
	switch {
	case mapErr == nil, errors.Is(mapErr, providers.ErrUnmappable):
	case errors.Is(mapErr, providers.ErrDeferred) && s.deferrer != nil:
		// The body is sound but its data could not be fetched: keep it durably with the job that will
		// finish it, and ack. 202, like a quarantine: accepted for processing, not processed yet.
		res, err := s.deferrer.Defer(ctx, ledger.Receipt{
			Provider:   name,
			ReceivedAt: receivedAt,
			DeliveryID: deliveryID,
			Booking:    mapped.Booking,
			Secret:     verified.Label(),
			Outcome:    ledger.OutcomeDeferred,
			Reason:     ledger.ClipReason(mapErr.Error()),
			Body:       body,
			Headers:    receiptHeaders(r.Header),
		}, verified)
		if err != nil {
			s.unavailable(w, name, started, err)
			return
		}
		s.acknowledge(w, r, name, started, deliveryID, res, http.StatusAccepted)
		return
	default:
		// Transient, and nobody to keep it: the provider retries.
		s.unavailable(w, name, started, fmt.Errorf("%w: %w", ErrTransientMap, mapErr))
		return
	}
	if mapErr != nil {
		mapErr = storableError{mapErr}
	}
	res, err := s.ledger.Record(ctx, ledger.Delivery{
		Receipt: ledger.Receipt{
			Provider:   name,
			ReceivedAt: receivedAt,
			DeliveryID: deliveryID,
			Secret:     verified.Label(),
			Reason:     ledger.ClipReason(mapped.Reason),
			Body:       body,
			Headers:    receiptHeaders(r.Header),
		},
		Events:   mapped.Events,
		Contacts: mapped.Contacts, // saved in the delivery's commit
		MapErr:   mapErr,
	})
	if err != nil {
		s.unavailable(w, name, started, err)
		return
	}

	status := http.StatusOK
	if res.Outcome == ledger.OutcomeQuarantined {
		// Acked so that the provider stops retrying something that will never map; operators find it
		// among the quarantined receipts.
		status = http.StatusAccepted
	}
	s.acknowledge(w, r, name, started, deliveryID, res, status)
}

// Deferrer (Config.Deferrer, optional) keeps a verified delivery whose Map failed with
// providers.ErrDeferred (its data could not be fetched yet) durably — the deferred receipt (with the
// body) and the work that will finish it, committed together — so that it can be acknowledged. A
// server without one answers such deliveries 503, for the provider to retry.
type Deferrer interface {
	// Defer stores r (outcome deferred) and schedules its completion; v names the secret that
	// verified it, for fetching with the same credentials later.
	Defer(ctx context.Context, r ledger.Receipt, v providers.Verified) (ledger.Result, error)
}

// acknowledge writes the 2xx of a delivery that is recorded (or durably deferred), counts it and logs
// it.
func (s *Server) acknowledge(w http.ResponseWriter, r *http.Request, name string, started time.Time, deliveryID string, res ledger.Result, status int) {
	resp := Response{Status: res.Outcome, Booking: string(res.Booking), Reason: res.Reason}
	if f := res.Finding; f != nil {
		resp.Finding, resp.Reason = string(f.Code), f.Reason
		s.metrics.findings.WithLabelValues(name, resp.Finding).Inc()
	}
	if res.Booking != "" {
		resp.Stream = res.Booking.Stream()
	}
	if !res.EventID.IsZero() {
		resp.EventID = res.EventID.String()
	}
	writeJSON(w, status, resp)

	latency := time.Since(started)
	s.metrics.deliveries.WithLabelValues(name, string(res.Outcome)).Inc()
	s.metrics.ack.WithLabelValues(name).Observe(latency.Seconds())
	level := slog.LevelInfo
	if res.Outcome == ledger.OutcomeQuarantined || res.Outcome == ledger.OutcomeDeferred || resp.Finding != "" {
		// A refusal's reason names event types, times and states, never what a person wrote.
		level = slog.LevelWarn
	}
	s.log.LogAttrs(r.Context(), level, "delivery",
		slog.String("provider", name),
		slog.String("outcome", string(res.Outcome)),
		slog.String("booking", resp.Booking),
		slog.String("event_id", resp.EventID),
		slog.String("delivery_id", deliveryID),
		slog.Int("appended", res.Appended),
		slog.String("reason", resp.Reason),
		slog.String("finding", resp.Finding),
		slog.Int("status", status),
		slog.Float64("latency_ms", float64(latency.Microseconds())/1000),
	)
}

// reject answers a request that failed before verification succeeded. It is always counted; its
// receipt (no body) is written only while the provider's token bucket allows, so that unauthenticated
// traffic cannot grow the receipts table without bound. The headers it keeps (receiptHeaders, bounded)
// are what an operator needs to see why a sender's requests fail: which signature header came.
func (s *Server) reject(ctx context.Context, w http.ResponseWriter, provider string, h http.Header, receivedAt time.Time, size int, err error) {
	row := classify(err)
	s.metrics.rejections.WithLabelValues(provider, row.code).Inc()
	s.metrics.deliveries.WithLabelValues(provider, outcomeRejected).Inc()

	receipted := false
	if b := s.buckets[provider]; b != nil && b.allow(receivedAt) {
		reason := ledger.ClipReason(fmt.Sprintf("%s: %v (%d bytes)", row.code, err, size))
		// Its own bounded context: a request whose body could not be read often has a canceled one
		// already (the client went away), and its receipt is what records that it happened.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.recordTO)
		rerr := s.ledger.Reject(rctx, ledger.Receipt{Provider: provider, ReceivedAt: receivedAt, Headers: receiptHeaders(h)}, reason)
		cancel()
		if rerr != nil {
			// The answer stays 401/413: the request was refused whatever the receipt's fate.
			s.log.Warn("rejected receipt not written", "provider", provider, "reason", row.code, "error", rerr.Error())
		} else {
			receipted = true
		}
	} else {
		s.metrics.receiptsDropped.WithLabelValues(provider).Inc()
	}
	s.log.Warn("rejected", "provider", provider, "reason", row.code, "status", row.status, "bytes", size, "receipted", receipted)
	// A refusal before the ledger says what was wrong in the verifier's own words ("missing signature
	// header: Calendly-Webhook-Signature"): they name headers and limits, never a secret, and a sender
	// fixing its setup needs them.
	s.writeErrorText(w, row, ledger.ClipReason(err.Error()))
}

// unavailable answers 503 for an authentic delivery that could not be recorded: nothing is acked, the
// provider retries.
func (s *Server) unavailable(w http.ResponseWriter, provider string, started time.Time, err error) {
	row := classify(err)
	s.metrics.deliveries.WithLabelValues(provider, outcomeUnavailable).Inc()
	// Summarised: an outage answers every delivery 503, and one line per request would bury the log.
	s.summary.Log("unavailable "+provider+" "+row.code, slog.LevelError, "delivery not recorded",
		slog.String("provider", provider), slog.String("reason", row.code), slog.Int("status", row.status),
		slog.String("error", err.Error()), slog.Float64("latency_ms", float64(time.Since(started).Microseconds())/1000))
	s.writeError(w, row)
}

func (s *Server) writeError(w http.ResponseWriter, row errorStatus) {
	s.writeErrorText(w, row, row.err.Error())
}

// writeErrorText answers row with text as the error in words.
func (s *Server) writeErrorText(w http.ResponseWriter, row errorStatus, text string) {
	if row.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int((s.retry+time.Second-1)/time.Second)))
	}
	writeJSON(w, row.status, ErrorResponse{Error: text, Code: row.code})
}

// bodyDigest identifies a delivery whose provider gave it no identity we could read.
func bodyDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// storableError keeps a Map error's identity (errors.Is) while making its text safe to store.
type storableError struct{ err error }

func (e storableError) Error() string { return ledger.ClipReason(e.err.Error()) }
func (e storableError) Unwrap() error { return e.err }
