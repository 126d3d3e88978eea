// Package acuity verifies and maps Acuity Scheduling webhook deliveries. Acuity's webhooks are thin: a
// form-encoded body (action, appointment id, calendarID, appointmentTypeID) signed with
// X-Acuity-Signature = base64(HMAC-SHA256(API key, raw body)), no timestamp, no data. The appointment
// is fetched from Acuity's API (GET /appointments/{id}, basic auth with the user id and the API key
// that verified the request), and the fetched state — the latest truth, whatever the action said —
// becomes booking events. A fetch that fails is not a mapping error: Map returns
// providers.ErrDeferred, and the ingress keeps the delivery for a background retry (Refetch).
//
// An appointment keeps its id across reschedules: booking ID "acuity-<id>", one stream, the first
// state seen is booking.Scheduled and each further slot a booking.Rescheduled. Event identities are
// built from the fetched state, so duplicates (changed next to rescheduled, retries, replays) collapse.
//
// API (NewAPI) is the provider sync's side: it lists appointments by date and maps each exactly as the
// fetch path maps the appointment a webhook names (same identities, hence the same event IDs), and
// manages dynamic webhooks (List, Connect) for adapters/providersync.
//
// It imports adapters/providers and the domain only; it must not import an HTTP server, a database, a
// job queue, an event store or adapters/providersync. The acuitytest subpackage is a fake of the
// appointments API for tests; acuitysink a fuller one for development and the sync's tests.
package acuity
