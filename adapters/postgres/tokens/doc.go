// Package tokens stores the admin surface's bearer tokens and UI sessions in PostgreSQL (tables
// api_tokens and ui_sessions, migration 0040): it implements auth.Store for the server and the
// create/list/revoke operations of `bookingledger token`.
//
// It holds no secret: the token's SHA-256 and the session cookie's hash come from adapters/httpapi/auth,
// which owns the format and the comparison. It imports pgx and auth's types, nothing of HTTP.
package tokens
