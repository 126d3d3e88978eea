package acuity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"
)

// ErrFetch: the appointments API could not be reached or did not answer 200.
var ErrFetch = errors.New("acuity appointment fetch failed")

// maxAppointmentBytes bounds a response: an appointment with every form answer is a few KiB.
const maxAppointmentBytes = 1 << 20

// fetchWithRetries fetches within the provider's budget: up to p.attempts tries, retrying only what a
// retry can fix (no answer, 408, 425, 429, 5xx), with a doubling, jittered backoff. It returns the
// number of attempts made.
func (p *Provider) fetchWithRetries(ctx context.Context, id, key string) (Appointment, int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.budget)
	defer cancel()
	wait := p.backoff
	for attempt := 1; ; attempt++ {
		a, retryable, err := p.fetchOnce(ctx, id, key)
		if err == nil || !retryable || attempt >= p.attempts {
			return a, attempt, err
		}
		// ±20 % so that deliveries that failed together do not retry together.
		d := time.Duration(float64(wait) * (0.8 + 0.4*rand.Float64()))
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d+p.attemptTimeout/4 {
			return a, attempt, err // no time left for a meaningful attempt
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return a, attempt, err
		case <-t.C:
		}
		wait *= 2
	}
}

// fetchOnce makes one GET /appointments/{id}. retryable says whether trying again soon may help.
// Errors wrap ErrFetch or ErrBadAppointment; they never carry the key or the response body.
func (p *Provider) fetchOnce(ctx context.Context, id, key string) (a Appointment, retryable bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.attemptTimeout)
	defer cancel()
	// id is canonical decimal (CanonicalID): nothing in it can change the path.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.apiURL+"/appointments/"+id, nil)
	if err != nil {
		return Appointment{}, false, fmt.Errorf("%w: build request: %v", ErrFetch, err)
	}
	req.SetBasicAuth(p.userID, key)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "bookingledger")
	resp, err := p.client.Do(req)
	if err != nil {
		// url.Error names the URL, which holds no credentials (they travel in the header).
		return Appointment{}, true, fmt.Errorf("%w: %v", ErrFetch, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAppointmentBytes+1))
	if resp.StatusCode != http.StatusOK {
		return Appointment{}, retryableStatus(resp.StatusCode), fmt.Errorf("%w: HTTP %d", ErrFetch, resp.StatusCode)
	}
	if err != nil {
		return Appointment{}, true, fmt.Errorf("%w: read response: %v", ErrFetch, err)
	}
	if len(b) > maxAppointmentBytes {
		return Appointment{}, false, fmt.Errorf("%w: response larger than %d bytes", ErrBadAppointment, maxAppointmentBytes)
	}
	a, err = ParseAppointment(b)
	if err != nil {
		return Appointment{}, false, err
	}
	return a, false, nil
}

func retryableStatus(code int) bool {
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests:
		return true
	case code >= 500:
		return true
	}
	return false
}
