package readmodel

import "bookingledger/projections"

// SetFailAfterApply makes every Apply fail after all its writes, before the commit.
func SetFailAfterApply(m *ReadModel, f func() error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failAfterApply = f
}

// LeaseBackend returns the server pid of a lease's session.
func LeaseBackend(l projections.Lease) uint32 { return l.(*lease).backend() }
