// Package email is the invitee email target of the process steps (adapters/process.Mailer) over SMTP
// with the standard library's net/smtp: one message per connection, STARTTLS when the server offers
// it, PLAIN auth when credentials are configured, a Message-ID derived from the step key; text only,
// or multipart/alternative with an HTML part when the step's templates wrote one. Send says
// what a failure proves: nothing was accepted (connection refused, a 4xx before or after the data —
// retried), refused for good (a 5xx — the step fails), or unknown (the connection was lost after the
// data was sent — never resent; an operator decides).
//
// Connections go through adapters/egress. It imports adapters/process (the interface it implements)
// and must not import the ledger or HTTP server packages.
package email
