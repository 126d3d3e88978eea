// Package devsinks is the dev-sinks command: local stand-ins (SMTP, CalDAV, the providers' APIs, a
// webhook receiver) for development and the README tour, and the environment it prints for serve.
package devsinks
