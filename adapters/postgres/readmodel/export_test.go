package readmodel

// SetFailAfterApply makes every Apply fail after all its writes, before the commit.
func SetFailAfterApply(m *ReadModel, f func() error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failAfterApply = f
}
