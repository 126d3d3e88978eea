package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"bookingledger/domain/ledger"
)

// Errors of provider API calls (the provider sync and subscription management). Callers branch on
// them: ErrAPIAuth and ErrAPIRequest are the operator's to fix (a wrong token, a missing scope, a
// request the provider refuses); ErrAPIUnavailable and ErrAPIRateLimited pass with time.
var (
	ErrAPIAuth        = errors.New("provider API refused the credentials")
	ErrAPINotFound    = errors.New("provider API: not found")
	ErrAPIRequest     = errors.New("provider API refused the request")
	ErrAPIRateLimited = errors.New("provider API rate limit exceeded")
	ErrAPIUnavailable = errors.New("provider API unavailable")
	ErrAPIResponse    = errors.New("provider API answered something unreadable")
)

// APIError is a provider API's non-2xx answer. It wraps one of the sentinels above by its status, and
// carries the provider's own message (bounded, never the credentials: they travel in headers).
type APIError struct {
	Provider string
	Method   string
	Path     string // the request's path, without the query (a query may hold e-mail filters)
	Status   int
	Message  string
}

func (e *APIError) Error() string {
	msg := ""
	if e.Message != "" {
		msg = ": " + e.Message
	}
	return fmt.Sprintf("%s API %s %s: HTTP %d%s", e.Provider, e.Method, e.Path, e.Status, msg)
}

// Unwrap sorts the status into the sentinel callers branch on.
func (e *APIError) Unwrap() error {
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return ErrAPIAuth
	case e.Status == http.StatusNotFound || e.Status == http.StatusGone:
		return ErrAPINotFound
	case e.Status == http.StatusTooManyRequests:
		return ErrAPIRateLimited
	case e.Status >= 500 || e.Status == http.StatusRequestTimeout:
		return ErrAPIUnavailable
	}
	return ErrAPIRequest
}

// Defaults of API.
const (
	// DefaultAPITimeout bounds one request.
	DefaultAPITimeout = 30 * time.Second
	// DefaultAPIRetries is how often a 429 or 5xx answer is tried again.
	DefaultAPIRetries = 4
	// DefaultAPIMaxWait caps one wait for a rate limit's reset: a provider asking for longer fails the
	// call (ErrAPIRateLimited) rather than holding a sync for minutes.
	DefaultAPIMaxWait = 2 * time.Minute
	// maxAPIResponseBytes bounds one response body: a page of 100 bookings is far below it.
	maxAPIResponseBytes = 16 << 20
)

// API is a small JSON client of one provider's REST API: a base URL, how requests authenticate, and
// the politeness every provider asks for — a 429 waits for Retry-After (seconds or an HTTP date) or
// the rate-limit reset header, a 5xx is retried with a doubling backoff, both bounded. It never
// follows a redirect (a redirect would carry the credentials elsewhere) and never logs.
type API struct {
	Provider string
	// Base is the API's base URL without a trailing slash, e.g. "https://api.calendly.com".
	Base string
	// Auth adds the credentials to a request (a bearer token, basic auth, a version header).
	Auth func(*http.Request)
	// Client makes the requests; nil means one with DefaultAPITimeout that follows no redirect.
	Client *http.Client
	// Retries and MaxWait bound the waits (defaults above when zero).
	Retries int
	MaxWait time.Duration
	// Sleep waits d or until ctx ends (tests pass a recorder); nil waits for real.
	Sleep func(ctx context.Context, d time.Duration) error
	// Requests, when set, is called once per HTTP request sent (a count for tests and metrics).
	Requests func(method, path string, status int)
}

// Do sends method to path (a path under Base, or an absolute URL under Base: providers hand out next-page
// URLs) with query and, when in is not nil, a JSON body; a 2xx answer is decoded into out (when not
// nil) and its raw body returned. Any other answer is an *APIError.
func (a *API) Do(ctx context.Context, method, path string, query url.Values, in, out any) ([]byte, error) {
	return a.DoHeaders(ctx, method, path, query, nil, in, out)
}

// DoHeaders is Do with extra request headers (an Idempotency-Key, a version header of one endpoint).
func (a *API) DoHeaders(ctx context.Context, method, path string, query url.Values, header http.Header, in, out any) ([]byte, error) {
	var payload []byte
	if in != nil {
		var err error
		if payload, err = json.Marshal(in); err != nil {
			return nil, fmt.Errorf("%s API %s %s: encode request: %w", a.Provider, method, pathOf(path), err)
		}
	}
	return a.send(ctx, method, path, query, header, payload, "application/json", out)
}

// send is the one request loop of Do, DoHeaders and DoForm: payload (nil for none) goes as
// contentType; 429 and 5xx answers are retried within Retries and MaxWait.
func (a *API) send(ctx context.Context, method, path string, query url.Values, header http.Header, payload []byte, contentType string, out any) ([]byte, error) {
	target, err := a.url(path, query)
	if err != nil {
		return nil, err
	}
	retries := a.Retries
	if retries == 0 {
		retries = DefaultAPIRetries
	}
	backoff := time.Second
	for attempt := 0; ; attempt++ {
		body, wait, err := a.once(ctx, method, target, header, payload, contentType)
		if err == nil {
			if out != nil && len(body) > 0 {
				if err := json.Unmarshal(body, out); err != nil {
					return body, fmt.Errorf("%w: %s %s %s: %v", ErrAPIResponse, a.Provider, method, pathOf(path), err)
				}
			}
			return body, nil
		}
		if wait < 0 || attempt >= retries {
			return body, err
		}
		if wait == 0 {
			wait, backoff = backoff, backoff*2
		}
		if wait > a.maxWait() {
			return body, err
		}
		if err := a.sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// once sends one request. wait < 0 means the error is final; wait > 0 is the provider's own word on
// when to try again; 0 with an error means "retry after the backoff".
func (a *API) once(ctx context.Context, method, target string, header http.Header, payload []byte, contentType string) ([]byte, time.Duration, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, -1, fmt.Errorf("%s API: build request: %w", a.Provider, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "bookingledger")
	if payload != nil {
		req.Header.Set("Content-Type", contentType)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if a.Auth != nil {
		a.Auth(req)
	}
	resp, err := a.client().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, -1, ctx.Err()
		}
		// url.Error names the URL, which holds no credentials (they travel in headers).
		return nil, 0, fmt.Errorf("%w: %s %s %s: %v", ErrAPIUnavailable, a.Provider, method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	if a.Requests != nil {
		a.Requests(method, req.URL.Path, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIResponseBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s %s %s: read answer: %v", ErrAPIUnavailable, a.Provider, method, req.URL.Path, err)
	}
	if len(body) > maxAPIResponseBytes {
		return nil, -1, fmt.Errorf("%w: %s %s %s: answer larger than %d bytes", ErrAPIResponse, a.Provider, method, req.URL.Path, maxAPIResponseBytes)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return body, 0, nil
	}
	apiErr := &APIError{Provider: a.Provider, Method: method, Path: req.URL.Path, Status: resp.StatusCode, Message: errorMessage(body)}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return body, RetryAfter(resp.Header, time.Now()), apiErr
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout:
		return body, RetryAfter(resp.Header, time.Now()), apiErr
	}
	return body, -1, apiErr
}

// RetryAfter reads how long a provider asks a client to wait: Retry-After (seconds or an HTTP date),
// else a rate-limit reset header — seconds until the reset (Calendly's X-RateLimit-Reset) or the
// reset's Unix time (Cal.com's X-RateLimit-Reset-Default), told apart by size. 0 when none is given.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return time.Duration(s * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0)
		}
	}
	for _, name := range []string{"X-RateLimit-Reset", "X-RateLimit-Reset-Default", "RateLimit-Reset"} {
		v := strings.TrimSpace(h.Get(name))
		if v == "" {
			continue
		}
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || s < 0 {
			continue
		}
		if s > 1e9 { // a Unix time, not a count of seconds
			return max(time.Unix(int64(s), 0).Sub(now), 0)
		}
		return time.Duration(s * float64(time.Second))
	}
	return 0
}

// errorMessage picks the provider's message out of an error body: Calendly's {"title","message"},
// Cal.com's {"error":{"message"}}, Stripe's {"error":{"message"}}, Acuity's {"message"}. Bounded and
// stripped of control characters; "" when the body holds none.
func errorMessage(body []byte) string {
	var e struct {
		Title   string          `json:"title"`
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	msg := e.Message
	if msg == "" && len(e.Error) > 0 {
		var inner struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &inner) == nil {
			msg = inner.Message
		} else {
			_ = json.Unmarshal(e.Error, &msg)
		}
	}
	if msg == "" {
		msg = e.Title
	}
	return ledger.StorableText(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, msg), 200)
}

func (a *API) url(path string, query url.Values) (string, error) {
	target := path
	if !strings.HasPrefix(path, "http://") && !strings.HasPrefix(path, "https://") {
		target = a.Base + path
	} else if !strings.HasPrefix(path, a.Base+"/") && path != a.Base {
		// A next-page URL must stay on the API's own host: the credentials go with it.
		return "", fmt.Errorf("%w: %s API: next page %q is not under %s", ErrAPIResponse, a.Provider, Clip(path), a.Base)
	}
	if len(query) > 0 {
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + query.Encode()
	}
	return target, nil
}

func pathOf(p string) string {
	if u, err := url.Parse(p); err == nil {
		return u.Path
	}
	return ""
}

func (a *API) client() *http.Client {
	if a.Client != nil {
		return a.Client
	}
	return defaultAPIClient
}

var defaultAPIClient = &http.Client{
	Timeout:       DefaultAPITimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func (a *API) maxWait() time.Duration {
	if a.MaxWait > 0 {
		return a.MaxWait
	}
	return DefaultAPIMaxWait
}

func (a *API) sleep(ctx context.Context, d time.Duration) error {
	if a.Sleep != nil {
		return a.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
