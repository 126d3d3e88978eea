// Package ui is the operator web UI under /ui/, written for the front desk first: server-rendered
// html/template pages — the calendar (a day or week grid per host, ?week= for a week's link, each
// booking named by its invitee), the search (booking id, invitee name or email), a booking's timeline
// (the booking, its plain-language story, and the internals behind a fold: findings, receipts,
// events, fold order, process steps, relay deliveries), the inbox (reconciliation items with what
// each asks of the operator, and failed steps), what was received (the receipts log), and what was
// sent: the relay's endpoints pages under /ui/admin/ (delivery log, retry, replay with a dry run
// first), and the providers page (each provider's webhook subscriptions, last delivery and last sync,
// as adapters/providersync keeps them). Times are in the zone the operator picks (a cookie), in one format. A vendored, pinned htmx
// (static/htmx.min.js, 2.0.11, 0BSD: static/htmx.LICENSE) and static/tz.js (offers the browser's
// zone) are progressive enhancement only: every page reads without JavaScript.
//
// Names and email addresses come only from the erasable contacts table (People), never from events.
//
// It sits behind adapters/httpapi/auth: Register mounts its routes on an auth.Routes, so reading
// needs a read token's session and every form post needs admin, and http.CrossOriginProtection
// refuses forms posted from other origins; Refusal writes the auth layer's refusals of a browser as
// the error page (Authenticator.SetRefusalPage), and WayBack adds a link back to /ui/ to River's job
// UI. The sign-in page exchanges a token for the session cookie (auth.Authenticator.SignIn). It reads
// through interfaces it declares (the read model, the contacts, the deliveries log, the step resolver
// and the relay's administration, whose value types it shares with adapters/relay so that the pages,
// the API and the CLI select, retry and replay alike); it must not query a database or an event store
// itself.
package ui
