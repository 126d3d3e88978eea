package calcom

import (
	"context"
	"net/http"
	"strings"
	"time"

	"bookingledger/adapters/providers"
)

// Cal.com API v2 constants.
const (
	// DefaultAPIURL is Cal.com's API v2 base.
	DefaultAPIURL = "https://api.cal.com/v2"
	// APIVersionHeader selects the version of an API v2 endpoint. Without it Cal.com answers with an
	// older version, whose booking list has another shape.
	APIVersionHeader = "cal-api-version"
	// BookingsAPIVersion is the version of GET /bookings the sync reads: the one with offset paging
	// (take/skip), the afterUpdatedAt filter and sortUpdatedAt, which the sync's change feed needs;
	// the later cursor version has neither a sort by update time nor more than one status a call.
	BookingsAPIVersion = "2024-08-13"
	// MaxPageSize is the largest take Cal.com accepts.
	MaxPageSize = 250
)

// APIConfig configures the API client.
type APIConfig struct {
	// Key is the API key (cal_live_… or cal_test_…), sent as a bearer token.
	Key string
	// URL is the API base; "" means DefaultAPIURL.
	URL string
	// Client makes the requests; nil means providers.API's default (a timeout, no redirects).
	Client *http.Client
	// PageSize is the take of each list request, 1–MaxPageSize; 0 means MaxPageSize (fewest
	// requests under the 120 a minute an API key may make).
	PageSize int
	// Sleep waits out a 429 or 5xx; nil waits for real (tests pass a recorder).
	Sleep func(ctx context.Context, d time.Duration) error
}

// API reads bookings from and manages webhooks at Cal.com's API v2. It implements the provider sync's
// Source and Subscriptions. Safe for concurrent use.
type API struct {
	api      *providers.API
	pageSize int
}

// NewAPI returns a client of Cal.com's API v2.
func NewAPI(cfg APIConfig) *API {
	base := strings.TrimRight(cfg.URL, "/")
	if base == "" {
		base = DefaultAPIURL
	}
	size := cfg.PageSize
	if size <= 0 || size > MaxPageSize {
		size = MaxPageSize
	}
	key := cfg.Key
	return &API{
		pageSize: size,
		api: &providers.API{
			Provider: Name,
			Base:     base,
			Client:   cfg.Client,
			Sleep:    cfg.Sleep,
			Auth: func(r *http.Request) {
				r.Header.Set("Authorization", "Bearer "+key)
				r.Header.Set(APIVersionHeader, BookingsAPIVersion)
			},
		},
	}
}

// Name returns "calcom".
func (a *API) Name() string { return Name }

// pagination is the offset paging object of Cal.com's list answers.
type pagination struct {
	ReturnedItems int  `json:"returnedItems"`
	HasNextPage   bool `json:"hasNextPage"`
}
