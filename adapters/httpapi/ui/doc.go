// Package ui is the operator web UI under /ui/: server-rendered html/template pages — the calendar
// (a day or week grid per resource), a booking's timeline, the reconciliation inbox and the
// deliveries log — with a vendored, pinned htmx (static/htmx.min.js, 2.0.11, 0BSD: static/htmx.LICENSE)
// for progressive enhancement only: every page reads without JavaScript.
//
// It sits behind adapters/httpapi/auth: Register mounts its routes on an auth.Routes, so reading
// needs a read token's session and every form post needs admin, and http.CrossOriginProtection
// refuses forms posted from other origins. The sign-in page exchanges a token for the session cookie
// (auth.Authenticator.SignIn). It reads through interfaces it declares (the read model and the
// deliveries log); it must not import a database driver or an event store.
package ui
