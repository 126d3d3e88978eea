package devsinks

import (
	"context"
	"net/http"
	"strings"
	"time"

	"bookingledger/adapters/providers/acuity/acuitysink"
	"bookingledger/cmd/bookingledger/internal/synccmd"
)

// acuityDevSink is Acuity's appointments API: `send acuity scheduled --booking N` makes serve fetch
// appointment N from it; each fetch is printed, and PUT <url>/appointments/N changes what it answers
// (moved, canceled). The provider sync lists appointments and manages webhooks there too; POST
// <url>/_fake/deliveries plays a change whose webhook never came.
func acuityDevSink() devSink {
	return devSink{
		name:  "acuity",
		about: "fake of Acuity's appointments API",
		start: func(ctx context.Context, report func(string, ...any)) ([]string, func() error, error) {
			state := func(canceled bool) string {
				if canceled {
					return "canceled"
				}
				return "active"
			}
			s, err := acuitysink.Start(acuitysink.Config{
				Addr: devSinkAddr(ctx),
				OnFetch: func(f acuitysink.Fetch) {
					report("appointment %s fetched (%s, %s)", f.ID, state(f.Canceled), f.Start.UTC().Format(time.RFC3339))
				},
				OnPut: func(id string, a acuitysink.Appointment) {
					report("appointment %s set (%s, %s)", id, state(a.Canceled), a.Start.UTC().Format(time.RFC3339))
				},
				OnRequest: func(r acuitysink.Request) {
					if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/appointments") {
						report("%s %s %d: %d appointment(s)", r.Method, r.Path, r.Status, r.Appointments)
						return
					}
					reportChange(report, r.Method, r.Path, r.Status)
				},
			})
			if err != nil {
				return nil, nil, err
			}
			return []string{synccmd.EnvAcuityAPIURL + "=" + s.URL()}, s.Close, nil
		},
	}
}
