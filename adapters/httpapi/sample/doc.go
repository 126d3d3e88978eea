// Package sample builds realistic, signed webhook deliveries for every provider the ingress serves:
// the bodies and headers a provider would send. The send command, the ingress tests and the ingest
// benchmark use it, so that all three exercise the real verification and mapping code.
//
// Bodies are a pure function of (provider, event, Params): equal inputs give byte-identical bodies, so
// sending twice is a redelivery, and a cancel built with the booking of a create cancels that booking.
// Only the signature headers depend on the signing time. The people in the payloads are fictional.
//
// It imports adapters/providers and the provider packages (for their Sign helpers); it must not
// import the HTTP server, a database or an event store.
package sample
