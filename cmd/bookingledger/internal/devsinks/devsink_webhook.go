package devsinks

import (
	"context"

	"bookingledger/cmd/bookingledger/internal/devsinks/webhooksink"
	"bookingledger/cmd/bookingledger/internal/relaycmd"
)

// EnvDevWebhookURL is the sink's receiving URL, for the tour's `endpoints add --url`; serve does not
// read it.
const EnvDevWebhookURL = "BOOKINGLEDGER_DEV_WEBHOOK_URL"

// webhookDevSink receives relay messages and alerts, and fails on request:
// curl -X POST "$BOOKINGLEDGER_DEV_WEBHOOK_CONTROL?fail=500" (fail=0 to recover).
func webhookDevSink() devSink {
	return devSink{
		name:  "webhook",
		about: "HTTP receiver of relay messages and alerts; POST /control?fail=500 makes it fail",
		start: func(ctx context.Context, report func(string, ...any)) ([]string, func() error, error) {
			s, err := webhooksink.Start(webhooksink.Config{
				Addr: devSinkAddr(ctx),
				OnMessage: func(m webhooksink.Message) {
					report("%d %s %s %s@%d (%d signature(s))", m.Status, m.WebhookID, m.Type, m.Booking, m.Version, m.Signatures)
				},
				OnAlert: func(text string) { report("alert: %s", text) },
				OnControl: func(status int) {
					if status == 0 {
						report("control: succeeding again")
						return
					}
					report("control: failing with %d", status)
				},
			})
			if err != nil {
				return nil, nil, err
			}
			return []string{
				EnvDevWebhookURL + "=" + s.URL() + webhooksink.PathHook,
				"BOOKINGLEDGER_DEV_WEBHOOK_CONTROL=" + s.URL() + webhooksink.PathControl,
				"BOOKINGLEDGER_ALERT_URL=" + s.URL() + webhooksink.PathAlerts,
				"BOOKINGLEDGER_ALERT_FORMAT=slack",
				relaycmd.EnvAllowPrivate + "=true",
			}, s.Close, nil
		},
	}
}
