package calendly

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"bookingledger/adapters/providers"
)

// DefaultAPIURL is Calendly's API v2 base.
const DefaultAPIURL = "https://api.calendly.com"

// pageSize is the largest count Calendly allows: the fewest requests per window.
const pageSize = "100"

// APIConfig configures the client of Calendly's API.
type APIConfig struct {
	// Token is a personal access token or OAuth access token with the scopes scheduled_events:read,
	// webhooks:read, webhooks:write and users:read.
	Token string
	// URL is the API base (default DefaultAPIURL); tests and dev-sinks point it at calendlyapi.
	URL    string
	Client *http.Client
	// Retries, MaxWait, Sleep and Requests are passed to providers.API (zero values: its defaults).
	Retries  int
	MaxWait  time.Duration
	Sleep    func(ctx context.Context, d time.Duration) error
	Requests func(method, path string, status int)
}

// API reads Calendly's scheduled events and invitees for the provider sync and manages Calendly's
// webhook subscriptions. Safe for concurrent use.
type API struct {
	http providers.API

	mu sync.Mutex
	// me and org are the token's user and organization (GET /users/me), read once.
	me, org string
	// userOnly holds the listings (by path) for which Calendly refused the organization-wide scope
	// (403: the token's user is not an admin or owner) and answered the user's own: from then on only
	// the user's own are read. Kept per listing, so that a refusal of one (webhooks need a paid plan)
	// does not narrow another.
	userOnly map[string]bool
}

// NewAPI returns a client of Calendly's API.
func NewAPI(cfg APIConfig) *API {
	base := strings.TrimRight(cfg.URL, "/")
	if base == "" {
		base = DefaultAPIURL
	}
	token := cfg.Token
	return &API{http: providers.API{
		Provider: Name,
		Base:     base,
		Auth:     func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) },
		Client:   cfg.Client,
		Retries:  cfg.Retries,
		MaxWait:  cfg.MaxWait,
		Sleep:    cfg.Sleep,
		Requests: cfg.Requests,
	}}
}

// Name returns "calendly".
func (a *API) Name() string { return Name }

// owner is the token's user and organization.
type owner struct{ me, org string }

// orgWide reports whether listing path is still read organization-wide.
func (a *API) orgWide(path string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.userOnly[path]
}

// whoami returns the token's user and organization, reading GET /users/me the first time only.
func (a *API) whoami(ctx context.Context) (owner, error) {
	a.mu.Lock()
	o := owner{me: a.me, org: a.org}
	a.mu.Unlock()
	if o.me != "" {
		return o, nil
	}
	var resp struct {
		Resource struct {
			URI                 string `json:"uri"`
			CurrentOrganization string `json:"current_organization"`
		} `json:"resource"`
	}
	if _, err := a.http.Do(ctx, http.MethodGet, "/users/me", nil, nil, &resp); err != nil {
		return owner{}, fmt.Errorf("calendly: read the token's user: %w", err)
	}
	if resp.Resource.URI == "" || resp.Resource.CurrentOrganization == "" {
		return owner{}, fmt.Errorf("%w: calendly GET /users/me: no uri or current_organization", providers.ErrAPIResponse)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.me, a.org = resp.Resource.URI, resp.Resource.CurrentOrganization
	return owner{me: a.me, org: a.org}, nil
}

// listPage is Calendly's answer to a listing.
type listPage struct {
	Collection []json.RawMessage `json:"collection"`
	Pagination struct {
		NextPageToken *string `json:"next_page_token"`
	} `json:"pagination"`
}

// pages GETs path page by page (count 100, page_token) and calls each with every page's collection.
func (a *API) pages(ctx context.Context, path string, query url.Values, each func([]json.RawMessage) error) error {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("count", pageSize)
	for {
		var p listPage
		if _, err := a.http.Do(ctx, http.MethodGet, path, q, nil, &p); err != nil {
			return err
		}
		if err := each(p.Collection); err != nil {
			return err
		}
		next := ""
		if p.Pagination.NextPageToken != nil {
			next = *p.Pagination.NextPageToken
		}
		if next == "" {
			return nil
		}
		if next == q.Get("page_token") {
			return fmt.Errorf("%w: calendly GET %s: next_page_token repeats the page just read", providers.ErrAPIResponse, path)
		}
		q.Set("page_token", next)
	}
}

// scopedPages is pages over the organization's resources (query orgQ) or, when Calendly refused
// that with 403 on the first page, over the user's own (userQ); once the user's own were answered,
// later calls read them directly.
func (a *API) scopedPages(ctx context.Context, path string, orgQ, userQ func(owner) url.Values, each func([]json.RawMessage) error) error {
	o, err := a.whoami(ctx)
	if err != nil {
		return err
	}
	if a.orgWide(path) {
		started := false
		err := a.pages(ctx, path, orgQ(o), func(c []json.RawMessage) error {
			started = true
			return each(c)
		})
		if started || !forbidden(err) {
			return err
		}
	}
	err = a.pages(ctx, path, userQ(o), each)
	if !forbidden(err) {
		a.mu.Lock()
		if a.userOnly == nil {
			a.userOnly = map[string]bool{}
		}
		a.userOnly[path] = true
		a.mu.Unlock()
	}
	return err
}

func forbidden(err error) bool {
	var apiErr *providers.APIError
	return errors.As(err, &apiErr) && apiErr.Status == http.StatusForbidden
}

// resourcePath turns a resource URI (https://api.calendly.com/<kind>/<uuid>) into its path under
// the API base, "/<kind>/<uuid>", refusing anything else: the URI comes from an answer, and the
// credentials go with the request.
func resourcePath(kind, uri string) (string, error) {
	_, uuid, ok := strings.Cut(uri, "/"+kind+"/")
	if !ok || uuid == "" || strings.ContainsAny(uuid, "/?#%") || providers.Token(kind, uuid) != nil {
		return "", fmt.Errorf("%q is not a Calendly %s URI", providers.Clip(uri), kind)
	}
	return "/" + kind + "/" + uuid, nil
}
