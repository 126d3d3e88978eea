package devsinks

import (
	"context"

	"bookingledger/adapters/providers/stripe/stripeapi"
	"bookingledger/cmd/bookingledger/internal/synccmd"
)

// The Stripe API the provider sync and `connect` talk to; dev-sinks points them at its fake.
const (
	DevStripeAPIKey = "sk_test_dev"
)

// stripeAPIDevSink is Stripe's events and webhook endpoints API: POST <url>/_fake/deliveries with a
// body `send stripe` builds stores it as an event the sync will read; POST
// <url>/_fake/subscriptions/<id>/disable plays Stripe disabling an endpoint. Each API request is
// printed.
func stripeAPIDevSink() devSink {
	return devSink{
		name:  "stripeapi",
		about: "fake of Stripe's events and webhook endpoints API",
		start: func(ctx context.Context, report func(string, ...any)) ([]string, func() error, error) {
			s, err := stripeapi.Start(stripeapi.Config{
				Addr: devSinkAddr(ctx),
				Key:  DevStripeAPIKey,
				OnRequest: func(r stripeapi.Request) {
					reportChange(report, r.Method, r.Path, r.Status)
				},
			})
			if err != nil {
				return nil, nil, err
			}
			return []string{synccmd.EnvStripeAPIURL + "=" + s.URL(), synccmd.EnvStripeAPIKey + "=" + DevStripeAPIKey}, s.Close, nil
		},
	}
}
