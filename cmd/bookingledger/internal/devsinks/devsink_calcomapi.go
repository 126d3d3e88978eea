package devsinks

import (
	"context"

	"bookingledger/adapters/providers/calcom/calcomapi"
	"bookingledger/cmd/bookingledger/internal/synccmd"
)

// The Cal.com API sink's environment: where the provider sync and `connect` reach Cal.com's API v2.
const (
	// devCalcomAPIKey is the only key the sink accepts: a test key, never a real one.
	devCalcomAPIKey = "cal_test_dev"
)

// calcomAPIDevSink is Cal.com's API v2 (bookings, webhooks). `send calcom … --url <host>/_fake/deliveries`
// (or a POST of such a body to <host>/_fake/deliveries) makes it answer for that booking; POST
// <host>/_fake/subscriptions/{id}/disable disables a webhook. Each request is printed as method, path and status only: queries and bodies hold
// names and addresses.
func calcomAPIDevSink() devSink {
	return devSink{
		name:  "calcom-api",
		about: "fake of Cal.com's API v2 bookings and webhooks",
		start: func(ctx context.Context, report func(string, ...any)) ([]string, func() error, error) {
			s, err := calcomapi.Start(calcomapi.Config{
				Addr: devSinkAddr(ctx),
				Key:  devCalcomAPIKey,
				OnRequest: func(r calcomapi.Request) {
					reportChange(report, r.Method, r.Path, r.Status)
				},
			})
			if err != nil {
				return nil, nil, err
			}
			return []string{synccmd.EnvCalcomAPIURL + "=" + s.URL(), synccmd.EnvCalcomAPIKey + "=" + devCalcomAPIKey}, s.Close, nil
		},
	}
}
