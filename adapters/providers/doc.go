// Package providers holds what every webhook provider package shares: the Provider contract the HTTP
// ingress drives (verify the raw bytes, then map them), the verification errors with their reasons,
// secret lists and fingerprints, the timestamp tolerance, the "t=…,v1=…" signature header, the
// deterministic event-ID derivation (Namespace, EventID), the mapping helpers and the one list of
// booking-ID prefixes (BookingPrefixes), invitee contacts; API, the one JSON client of a provider's
// REST API with the errors callers branch on; and the types a provider package fills for the provider
// sync (SyncWindow, SyncItem, SyncPage), whose interfaces adapters/providersync declares.
//
// Provider packages (calendly, calcom, stripe, standard, acuity) import it; it must not import them, nor
// any HTTP server, database or event-store package. It imports the domain, google/uuid and the
// standard library (net/http for API) only.
package providers
