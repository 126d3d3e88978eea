// Package ui is the operator web UI under /ui/: server-rendered html/template pages — the calendar
// (a day or week grid per resource), a booking's timeline with its process steps and relay
// deliveries, the reconciliation inbox, the deliveries log, and the relay's endpoints pages under
// /ui/admin/ (delivery log, retry, replay with a dry run first) — with a vendored, pinned htmx (static/htmx.min.js, 2.0.11, 0BSD: static/htmx.LICENSE)
// for progressive enhancement only: every page reads without JavaScript.
//
// It sits behind adapters/httpapi/auth: Register mounts its routes on an auth.Routes, so reading
// needs a read token's session and every form post needs admin, and http.CrossOriginProtection
// refuses forms posted from other origins. The sign-in page exchanges a token for the session cookie
// (auth.Authenticator.SignIn). It reads through interfaces it declares (the read model, the
// deliveries log, the step resolver and the relay's administration, whose value types it shares with
// adapters/relay so that the pages, the API and the CLI select, retry and replay alike); it must not
// query a database or an event store itself.
package ui
