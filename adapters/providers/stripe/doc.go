// Package stripe verifies and maps Stripe webhook events: the Stripe-Signature scheme (any v1 under any
// whsec_ secret, used as-is), and the payment events a booking cares about (payment_intent.succeeded,
// payment_intent.payment_failed, charge.refunded, checkout.session.completed, charge.dispute.created)
// turned into booking payment events that carry every Stripe id of the payment.
//
// API (NewAPI) is the provider sync's side: it reads Stripe's event history — each listed event is
// the very body a webhook carries, mapped by the same mapper — and manages webhook endpoints (List,
// Connect) for adapters/providersync, through providers.API.
//
// It imports adapters/providers and the domain only; it must not import an HTTP server, a database, an
// event store, adapters/providersync or a Stripe SDK. The stripeapi subpackage is a fake of the API.
package stripe
