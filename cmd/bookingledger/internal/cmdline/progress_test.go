package cmdline

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"bookingledger/projections"
)

func TestProgressBarLines(t *testing.T) {
	var buf bytes.Buffer
	bar := NewProgressBar(&buf, "rebuild calendar")
	bar.AfterReplay = "writing the read model and syncing the reconciliation queue"
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	bar.now = func() time.Time { return now }
	steps := []struct {
		after time.Duration
		done  int64
	}{{0, 0}, {200 * time.Millisecond, 5000}, {1200 * time.Millisecond, 10000}, {300 * time.Millisecond, 15000}, {300 * time.Millisecond, 20000}}
	for _, s := range steps {
		now = now.Add(s.after)
		bar.Update(projections.Progress{Done: s.done, Total: 20000})
	}
	bar.Finish()
	assert.Equal(t, `rebuild calendar: 0/20000 events (  0%)
rebuild calendar: 10000/20000 events ( 50%)
rebuild calendar: 20000/20000 events (100%)
rebuild calendar: replayed the log; writing the read model and syncing the reconciliation queue
`, buf.String(), "not a terminal: the first line, at most one a second, and the last")
}
