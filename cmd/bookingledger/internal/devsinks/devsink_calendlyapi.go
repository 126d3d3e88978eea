package devsinks

import (
	"context"

	"bookingledger/adapters/providers/calendly/calendlyapi"
	"bookingledger/cmd/bookingledger/internal/synccmd"
)

// devCalendlyAPIToken is the token the dev fake accepts.
const (
	devCalendlyAPIToken = "dev-calendly-token"
)

// calendlyAPIDevSink is a fake of Calendly's API v2 (scheduled events, invitees, webhook
// subscriptions) for the provider sync. POST <url>/_fake/deliveries with a body `send calendly`
// builds records that invitee there; POST <url>/_fake/subscriptions/{uuid}/disable disables a
// subscription as Calendly does after a day of failed deliveries. Each request is printed by method,
// path and status only: queries and bodies may hold e-mail addresses.
func calendlyAPIDevSink() devSink {
	return devSink{
		name:  "calendly-api",
		about: "fake of Calendly's API for the provider sync",
		start: func(ctx context.Context, report func(string, ...any)) ([]string, func() error, error) {
			s, err := calendlyapi.Start(calendlyapi.Config{
				Addr:  devSinkAddr(ctx),
				Token: devCalendlyAPIToken,
				OnRequest: func(method, path string, status int) {
					reportChange(report, method, path, status)
				},
			})
			if err != nil {
				return nil, nil, err
			}
			return []string{synccmd.EnvCalendlyAPIURL + "=" + s.URL(), synccmd.EnvCalendlyAPIToken + "=" + devCalendlyAPIToken}, s.Close, nil
		},
	}
}
