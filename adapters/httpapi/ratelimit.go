package httpapi

import (
	"sync"
	"time"
)

// tokenBucket bounds how many rejected receipts one provider writes: up to burst at once, refilled at
// rate per second. Rejections past it are still answered and counted, only not stored.
//
// It is a dozen lines rather than golang.org/x/time/rate because it needs nothing else (no waiting,
// no reservations), takes the server's clock so that tests are deterministic, and keeps a module out
// of go.mod for one struct.
type tokenBucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
}

func newTokenBucket(perMinute int, now time.Time) *tokenBucket {
	b := float64(perMinute)
	return &tokenBucket{rate: b / 60, burst: b, tokens: b, last: now}
}

// allow takes one token if there is one.
func (b *tokenBucket) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = min(b.burst, b.tokens+elapsed*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
