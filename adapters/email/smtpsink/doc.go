// Package smtpsink is a capturing SMTP server on loopback: it accepts every message, keeps it in
// memory and reports it, so that tests and `bookingledger dev-sinks` can see exactly what the invitee
// email steps sent. It can drop the connection after the message's data (the unknown-outcome case an
// email step must not resend) or answer with a transient error, when a test asks it to.
//
// It is built on github.com/emersion/go-smtp's server. It imports nothing of bookingledger and must
// not: it is a stand-in for a mail provider, not part of the ledger.
package smtpsink
