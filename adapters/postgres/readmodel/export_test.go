package readmodel

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"bookingledger/adapters/postgres/pgtest"
)

// SetFailAfterApply makes every Apply fail after all its writes, before the commit.
func SetFailAfterApply(m *ReadModel, f func() error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failAfterApply = f
}

// RequireIndexedGenericPlans fails t for every statement of sqls whose generic plan, over a calendar
// of a few thousand rows, reads one of its growing tables without an index condition.
func RequireIndexedGenericPlans(t *testing.T, sqls []string) {
	t.Helper()
	conn := fillCalendar(t, pgtest.NewDatabase(t))
	for i, sql := range sqls {
		bad, raw, err := unindexedPlan(context.Background(), conn, fmt.Sprintf("batch_probe_%d", i), sql, "")
		if !assert.NoError(t, err) {
			continue
		}
		for _, b := range bad {
			assert.Failf(t, "generic plan reads a table without an index condition", "%s\nin: %s\nplan: %s", b, sql, raw)
		}
	}
}
