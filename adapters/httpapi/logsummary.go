package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultLogSummaryInterval is how often at most one line of a repeating failure is logged.
const DefaultLogSummaryInterval = time.Second

// logSummary keeps repeated lines of one kind (a 503 per delivery while the database is down, a
// warning per /readyz probe) from flooding the log: the first line of a kind is written at once;
// lines of the same kind within the interval after it are counted instead, and one line at the end of
// the interval carries the latest one's attributes and "repeated", how many lines it stands for. So
// a storm logs about one line per second per kind, and nothing is hidden: the counts add up to every
// occurrence. Metrics are counted where the event happens, never here, and stay exact.
type logSummary struct {
	log   *slog.Logger
	every time.Duration
	mu    sync.Mutex
	kinds map[string]*summaryState
}

type summaryState struct {
	last       time.Time // when the last line of the kind was written
	suppressed int
	level      slog.Level
	msg        string
	attrs      []slog.Attr // of the latest suppressed occurrence
	timer      *time.Timer
}

func newLogSummary(log *slog.Logger, every time.Duration) *logSummary {
	return &logSummary{log: log, every: every, kinds: map[string]*summaryState{}}
}

// Log writes msg now, or counts it into the next summary line of kind.
func (l *logSummary) Log(kind string, level slog.Level, msg string, attrs ...slog.Attr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	st := l.kinds[kind]
	if st == nil {
		st = &summaryState{}
		l.kinds[kind] = st
	}
	if st.suppressed == 0 && now.Sub(st.last) >= l.every {
		st.last = now
		l.log.LogAttrs(context.Background(), level, msg, attrs...)
		return
	}
	st.suppressed++
	st.level, st.msg, st.attrs = level, msg, attrs
	if st.timer == nil {
		st.timer = time.AfterFunc(max(st.last.Add(l.every).Sub(now), 0), func() { l.flush(kind) })
	}
}

func (l *logSummary) flush(kind string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.kinds[kind]
	if st == nil || st.suppressed == 0 {
		return
	}
	attrs := append(st.attrs, slog.Int("repeated", st.suppressed), slog.String("over", l.every.String()))
	l.log.LogAttrs(context.Background(), st.level, st.msg, attrs...)
	st.last, st.suppressed, st.attrs, st.timer = time.Now(), 0, nil, nil
}
