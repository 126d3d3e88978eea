// Package providers holds what every webhook provider package shares: the Provider contract the HTTP
// ingress drives (verify the raw bytes, then map them), the verification errors with their reasons,
// secret lists and fingerprints, the timestamp tolerance, the "t=…,v1=…" signature header, and the
// deterministic event-ID derivation (Namespace, EventID).
//
// Provider packages (calendly, calcom, stripe, standard, acuity) import it; it must not import them, nor
// any HTTP server, database or event-store package. It imports the domain and google/uuid only.
package providers
