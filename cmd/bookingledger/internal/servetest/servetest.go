// Package servetest holds what the tests that start `serve` in-process share — those of
// cmd/bookingledger (through the binary's run) and of its serve package: serve started on ephemeral
// ports (Commands.Start) with an admin token created on first use (Served.AdminToken), a command run
// as the binary would (Commands.CLI, Commands.Send), a request with a bearer token (HTTPDo), serve's
// stdout that hands over the bound address, a locked buffer, and a getenv over a map. Imported by
// tests only.
package servetest

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"bookingledger/adapters/jobs/jobstest"
	"bookingledger/adapters/postgres/pgtest"
)

// AddrWriter is serve's stdout in tests: it hands over the address of the "listening on" line, so
// tests wait for the bound port instead of sleeping.
type AddrWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	Addr  chan string
	admin string // from the "admin listening on" line, printed before "listening on"
	sent  bool
}

// NewAddrWriter returns an AddrWriter whose Addr receives the address once.
func NewAddrWriter() *AddrWriter { return &AddrWriter{Addr: make(chan string, 1)} }

func (w *AddrWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent {
		for line := range strings.SplitSeq(w.buf.String(), "\n") {
			if a, ok := strings.CutPrefix(line, "admin listening on "); ok {
				w.admin = strings.TrimSpace(a)
			}
			if a, ok := strings.CutPrefix(line, "listening on "); ok && strings.HasSuffix(w.buf.String(), "\n") {
				w.Addr <- strings.TrimSpace(a)
				w.sent = true
				break
			}
		}
	}
	return len(p), nil
}

// AdminAddr is the admin listener's address, once printed.
func (w *AddrWriter) AdminAddr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.admin
}

// LockedBuffer is a buffer several goroutines write (a serve's stderr) and a test reads.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// EnvOf is a getenv of the variables in kv only.
func EnvOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// NewDatabaseURL is pgtest.NewDatabaseURL with River's tables too (jobstest.Template): a migrated database
// for a serve, which finds nothing to migrate.
func NewDatabaseURL(t testing.TB) string {
	t.Helper()
	return pgtest.NewDatabaseURLWith(t, jobstest.Template)
}
