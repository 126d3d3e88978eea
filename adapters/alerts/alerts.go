package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"bookingledger/adapters/providers/standard"
)

// Formats of alert bodies.
const (
	// FormatStandard: a Standard Webhooks message signed with Config.Secret.
	FormatStandard = "standard"
	// FormatSlack: {"text": "..."}, as Slack's and compatible incoming webhooks take it.
	FormatSlack = "slack"
)

// Operational event types: the type of every alert, whoever raises it (docs/relay.md, "Operational
// webhooks"). The relay raises the endpoint and delivery ones, the provider sync the provider ones.
const (
	// TypeEndpointFailing: an endpoint's failure streak reached 1, 5 or 20 consecutive failures.
	TypeEndpointFailing = "endpoint.failing"
	// TypeEndpointRecovered: the first success after a streak that alerted.
	TypeEndpointRecovered = "endpoint.recovered"
	// TypeEndpointDisabled: an endpoint stopped receiving (disable, a 410 answer, a circuit breaker).
	TypeEndpointDisabled = "endpoint.disabled"
	// TypeDeliveryDead: a delivery's retry schedule ran out.
	TypeDeliveryDead = "delivery.dead"
	// TypeProviderSubscriptionDisabled: a provider disabled the ledger's webhook subscription.
	TypeProviderSubscriptionDisabled = "provider.subscription_disabled"
	// TypeProviderMissedWebhooks: a provider sync found bookings whose webhooks never came.
	TypeProviderMissedWebhooks = "provider.missed_webhooks"
	// TypeProviderSyncFailed: a provider sync could not run.
	TypeProviderSyncFailed = "provider.sync_failed"
)

// Types lists every operational event type.
var Types = []string{TypeEndpointFailing, TypeEndpointRecovered, TypeEndpointDisabled, TypeDeliveryDead,
	TypeProviderSubscriptionDisabled, TypeProviderMissedWebhooks, TypeProviderSyncFailed}

// ErrPermanent marks a send that cannot succeed by trying again (a malformed configuration).
var ErrPermanent = errors.New("alert cannot be sent")

// Config says where alerts go besides the log and the metrics.
type Config struct {
	// URL receives a POST per alert; empty: log and metrics only.
	URL string
	// Format is FormatStandard (default) or FormatSlack.
	Format string
	// Secret signs standard alerts ("whsec_...").
	Secret string
}

// Check validates the configuration's format and secret (the caller checks the URL by its own
// rule of allowed targets).
func (c Config) Check() error {
	if c.URL == "" {
		return nil
	}
	switch c.Format {
	case "", FormatStandard:
		if _, err := standard.DecodeSecret(c.Secret); err != nil {
			return fmt.Errorf("alert secret (needed to sign standard alerts): %w", err)
		}
	case FormatSlack:
	default:
		return fmt.Errorf("alert format %q: want %s or %s", c.Format, FormatStandard, FormatSlack)
	}
	return nil
}

// Message is one alert: the Standard Webhooks message is {"type", "timestamp", "data"}, where data is
// the kind's own document and always holds "text", the sentence the Slack format sends alone.
type Message struct {
	// ID is the webhook-id: stable across the retries of one alert.
	ID   string
	Type string
	At   time.Time
	Text string
	// Data is the kind's document; it is marshalled with "text" added when it is a map, else as is.
	Data any
}

// Doer sends a request: an *http.Client, or a test's stand-in.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// maxReadResponse bounds what is read of the receiver's answer.
const maxReadResponse = 64 << 10

// Send POSTs m to c.URL with client. A non-2xx answer or a transport error is returned for the caller's
// retry; errors wrapping ErrPermanent will not pass with time.
func Send(ctx context.Context, client Doer, c Config, m Message, now time.Time) error {
	if c.URL == "" {
		return nil
	}
	if c.Format == FormatSlack {
		body, err := Slack(m)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPermanent, err)
		}
		return post(ctx, client, c.URL, http.Header{}, body)
	}
	return SendSigned(ctx, client, c.URL, m, now, c.Secret)
}

// Body is m as a Standard Webhooks message: {"type", "timestamp", "data"}.
func Body(m Message) ([]byte, error) {
	return json.Marshal(struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      any       `json:"data"`
	}{m.Type, m.At.UTC(), m.Data})
}

// Slack renders m for Slack's and compatible incoming webhooks: {"text": m.Text}.
func Slack(m Message) ([]byte, error) { return json.Marshal(map[string]string{"text": m.Text}) }

// SendSigned POSTs m as a Standard Webhooks message to url, signed with each of secrets (an
// endpoint's, during a rotation two): the alert URL's send, and an operational webhook's to an
// endpoint subscribed to it.
func SendSigned(ctx context.Context, client Doer, url string, m Message, now time.Time, secrets ...string) error {
	body, err := Body(m)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	h, err := standard.SignedHeaders(m.ID, now, body, secrets...)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	return post(ctx, client, url, h, body)
}

func post(ctx context.Context, client Doer, url string, h http.Header, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "bookingledger-alerts")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReadResponse))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("receiver answered HTTP %d", resp.StatusCode)
	}
	return nil
}
