package jobs

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
)

// River's routine Info records go to the log as Debug; its warnings stay warnings.
func TestRiverInfoIsDebug(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(quietInfo{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})}).With("component", "river")
	log.Info("producer: Producer job counts")
	log.Warn("something to act on")
	assert.NotContains(t, buf.String(), "Producer job counts")
	assert.Contains(t, buf.String(), "level=WARN msg=\"something to act on\" component=river")

	buf.Reset()
	log = slog.New(quietInfo{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})})
	log.Info("River client started")
	assert.Contains(t, buf.String(), "level=DEBUG msg=\"River client started\"")
}
