// Package calendly verifies and maps Calendly webhook (API v2) deliveries: the
// Calendly-Webhook-Signature scheme, and invitee.created, invitee.canceled and invitee_no_show.* turned
// into booking events; and, for the provider sync, reads Calendly's API (API: scheduled events and
// their invitees mapped by the webhook mapping itself, webhook subscriptions) through providers.API.
//
// A Calendly booking is an invitee: its booking ID is "calendly-<invitee uuid>", its meeting the
// scheduled event URI, its resources the hosts' user URIs. It imports adapters/providers and the
// domain only; it must not import an HTTP server, a database, an event store or adapters/providersync
// (whose Source and Subscriptions it implements). Its fake API server is calendlyapi.
package calendly
