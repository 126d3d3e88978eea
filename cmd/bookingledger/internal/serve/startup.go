package serve

import (
	"log/slog"
	"time"
)

// startup times serve's start in phases, for the one "started" log line: where a slow restart's time
// went (docs/operations/deploy.md, "Restart time").
type startup struct {
	began time.Time
	last  time.Time
	attrs []any
}

func newStartup() *startup {
	now := time.Now()
	return &startup{began: now, last: now}
}

// mark ends the phase named name.
func (s *startup) mark(name string) {
	now := time.Now()
	s.attrs = append(s.attrs, slog.Float64(name+"_ms", float64(now.Sub(s.last).Microseconds())/1000))
	s.last = now
}

// log writes the phases and the total.
func (s *startup) log(log *slog.Logger) {
	log.Info("started", append(s.attrs, slog.Float64("total_ms", float64(time.Since(s.began).Microseconds())/1000))...)
}
