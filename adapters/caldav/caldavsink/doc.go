// Package caldavsink is a CalDAV server on loopback with an in-memory calendar store: github.com/
// emersion/go-webdav's caldav.Handler over a Backend kept in a map. Tests and `bookingledger
// dev-sinks` use it as the hosts' calendar server, so the host calendar steps are exercised over the
// real protocol (PUT with If-None-Match / If-Match, GET, DELETE, ETags). Any collection path is a
// calendar: one server stands in for the calendar of every host resource.
//
// It honours conditional requests as RFC 4791 servers must (412 when If-None-Match: * meets an
// existing object or If-Match meets another ETag), and can answer chosen requests with a status of
// the test's choosing (Config.Fault), e.g. 503 to exercise retries.
//
// It imports nothing of bookingledger and must not: it is a stand-in for a calendar provider.
package caldavsink
