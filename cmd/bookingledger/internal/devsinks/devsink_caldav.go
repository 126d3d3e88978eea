package devsinks

import (
	"context"

	"bookingledger/adapters/caldav/caldavsink"
	"bookingledger/cmd/bookingledger/internal/stepscmd"
)

// caldavDevSink is the hosts' calendar server: every PUT and DELETE of a calendar object is printed.
func caldavDevSink() devSink {
	return devSink{
		name:  "caldav",
		about: "in-memory CalDAV server for host calendars",
		start: func(ctx context.Context, report func(string, ...any)) ([]string, func() error, error) {
			s, err := caldavsink.Start(caldavsink.Config{Addr: devSinkAddr(ctx), OnChange: func(c caldavsink.Change) {
				what := "updated"
				switch {
				case c.Method == "DELETE":
					what = "deleted"
				case c.Created:
					what = "created"
				}
				report("%s %s", what, c.Object)
			}})
			if err != nil {
				return nil, nil, err
			}
			return []string{
				stepscmd.EnvCalDAVURLTemplate + "=" + s.URL() + "/dav/{resource}/bookings/",
				stepscmd.EnvStepsAllowPrivate + "=true",
			}, s.Close, nil
		},
	}
}
