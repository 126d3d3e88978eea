package devsinks

import (
	"context"

	"bookingledger/adapters/email/smtpsink"
	"bookingledger/cmd/bookingledger/internal/stepscmd"
)

// smtpDevSink captures the invitee emails: every message is printed with its Message-ID and subject
// (not its recipient: even demo addresses stay out of logs).
func smtpDevSink() devSink {
	return devSink{
		name:  "smtp",
		about: "capturing SMTP server for invitee emails",
		start: func(ctx context.Context, report func(string, ...any)) ([]string, func() error, error) {
			s, err := smtpsink.Start(smtpsink.Config{Addr: devSinkAddr(ctx), OnMessage: func(m smtpsink.Message) {
				report("message %s subject %q (%d bytes)", m.MessageID, m.Subject, len(m.Data))
			}})
			if err != nil {
				return nil, nil, err
			}
			return []string{
				stepscmd.EnvSMTPAddr + "=" + s.Addr(),
				stepscmd.EnvSMTPFrom + "=bookings@bookingledger.localhost",
				stepscmd.EnvStepsAllowPrivate + "=true",
			}, s.Close, nil
		},
	}
}
