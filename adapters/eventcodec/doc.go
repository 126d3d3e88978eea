// Package eventcodec is the wire format of booking events in every event store: versioned JSON DTOs
// for each booking.EventType in Data, and the envelope (booking, provider, provider reference,
// provider time) in Metadata; and of the link events of linked resources (EncodeResource,
// DecodeResource). Domain types carry no tags; this package owns the mapping. Stored events are read
// with goccy/go-json (ADR 0009).
//
// A stored wire name is never re-used for another shape: a changed payload gets a new type name and
// its own DTO, and the old DTO keeps decoding old events. It imports domain/, goccy/go-json and the
// standard library.
package eventcodec
