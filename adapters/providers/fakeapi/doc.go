// Package fakeapi is what every fake of a provider's API shares (calendlyapi, calcomapi, stripeapi,
// acuitysink): an HTTP server on a loopback address that tests and `bookingledger dev-sinks` start
// and stop. It imports the standard library only.
package fakeapi
