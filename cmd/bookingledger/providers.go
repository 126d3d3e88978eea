package main

import (
	"errors"
	"time"

	"bookingledger/adapters/jobs"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/acuity"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/standard"
	"bookingledger/adapters/providers/stripe"
)

// providerSpec names a provider's configuration: its secrets variable and, for schemes that sign a
// timestamp, its tolerance variable and default. build returns the provider and, when the provider
// can finish deferred deliveries (fetch their data later), the same provider as the job queue's
// refetcher.
type providerSpec struct {
	name       string
	secretsEnv string
	toleranceF string // flag name; "" when the scheme signs no timestamp
	toleranceE string
	toleranceD time.Duration
	build      func(s providers.Secrets, tol time.Duration, f providerFlags) (providers.Provider, jobs.Refetcher, error)
	// connectable: `providers connect` may create this provider's subscriptions with a secret of its
	// own, which serve then verifies with besides the configured ones.
	connectable bool
}

// Acuity's settings beyond its keys: the webhooks carry no data, so the provider fetches appointments.
const (
	envAcuityUserID = "BOOKINGLEDGER_ACUITY_USER_ID"
	envAcuityAPIURL = "BOOKINGLEDGER_ACUITY_API_URL"
)

// providerFlags are the provider settings that are flags (secrets are not): one tolerance per
// timestamped scheme, and Acuity's API user and URL.
type providerFlags struct {
	tolerances   map[string]*time.Duration
	acuityUserID *string
	acuityAPIURL *string
}

func providerSpecs() []providerSpec {
	return []providerSpec{
		{
			name: calendly.Name, secretsEnv: "BOOKINGLEDGER_CALENDLY_SIGNING_KEYS", connectable: true,
			toleranceF: "calendly-tolerance", toleranceE: "BOOKINGLEDGER_CALENDLY_TOLERANCE", toleranceD: calendly.DefaultTolerance,
			build: func(s providers.Secrets, tol time.Duration, _ providerFlags) (providers.Provider, jobs.Refetcher, error) {
				return calendly.New(s, tol), nil, nil
			},
		},
		{
			// Cal.com signs no timestamp: no tolerance to configure; a replay is a duplicate by event ID.
			name: calcom.Name, secretsEnv: "BOOKINGLEDGER_CALCOM_SECRETS", connectable: true,
			build: func(s providers.Secrets, _ time.Duration, _ providerFlags) (providers.Provider, jobs.Refetcher, error) {
				return calcom.New(s), nil, nil
			},
		},
		{
			// Acuity signs no timestamp either; its API keys verify signatures and authenticate the
			// appointment fetch (with the user id).
			name: acuity.Name, secretsEnv: "BOOKINGLEDGER_ACUITY_API_KEYS",
			build: func(s providers.Secrets, _ time.Duration, f providerFlags) (providers.Provider, jobs.Refetcher, error) {
				cfg := acuity.Config{Keys: s}
				if f.acuityUserID != nil {
					cfg.UserID = *f.acuityUserID
				}
				if f.acuityAPIURL != nil {
					cfg.APIURL = *f.acuityAPIURL
				}
				p, err := acuity.New(cfg)
				switch {
				case errors.Is(err, acuity.ErrNoUserID):
					return nil, nil, usageErrorf("BOOKINGLEDGER_ACUITY_API_KEYS is set but %s is not (or pass --acuity-user-id): "+
						"appointments are fetched with the user id and the API key", envAcuityUserID)
				case err != nil:
					return nil, nil, usageErrorf("%s / --acuity-api-url: %w", envAcuityAPIURL, err)
				}
				return p, p, nil
			},
		},
		{
			name: stripe.Name, secretsEnv: "BOOKINGLEDGER_STRIPE_SECRETS", connectable: true,
			toleranceF: "stripe-tolerance", toleranceE: "BOOKINGLEDGER_STRIPE_TOLERANCE", toleranceD: stripe.DefaultTolerance,
			build: func(s providers.Secrets, tol time.Duration, _ providerFlags) (providers.Provider, jobs.Refetcher, error) {
				return stripe.New(s, tol), nil, nil
			},
		},
		{
			name: standard.Name, secretsEnv: "BOOKINGLEDGER_STANDARD_SECRETS",
			toleranceF: "standard-tolerance", toleranceE: "BOOKINGLEDGER_STANDARD_TOLERANCE", toleranceD: standard.DefaultTolerance,
			build: func(s providers.Secrets, tol time.Duration, _ providerFlags) (providers.Provider, jobs.Refetcher, error) {
				p, err := standard.New(s, tol)
				if err != nil {
					return nil, nil, err
				}
				return p, nil, nil
			},
		},
	}
}

type providerConfig struct {
	list []providers.Provider
	// refetchers finish deferred deliveries: the providers whose specs name them.
	refetchers   []jobs.Refetcher
	secrets      map[string]providers.Secrets
	unconfigured []string
	// rebuild makes a provider anew with other secrets (the stored ones of providersync), by name; the
	// providers whose subscriptions `providers connect` manages only.
	rebuild map[string]func(providers.Secrets) providers.Provider
}

func (c providerConfig) names() []string {
	out := make([]string, len(c.list))
	for i, p := range c.list {
		out[i] = p.Name()
	}
	return out
}

// registerProviderFlags adds one tolerance flag per timestamped scheme and Acuity's API flags.
func registerProviderFlags(f *envFlags) providerFlags {
	out := providerFlags{tolerances: map[string]*time.Duration{}}
	for _, s := range providerSpecs() {
		if s.toleranceF == "" {
			continue
		}
		out.tolerances[s.name] = f.Duration(s.toleranceF, []string{s.toleranceE}, s.toleranceD,
			"how far a "+s.name+" signature timestamp may lie from this server's clock")
	}
	out.acuityUserID = f.String("acuity-user-id", []string{envAcuityUserID}, "",
		"Acuity user id: with the API key that verified a webhook, the basic-auth login of the appointment fetch")
	out.acuityAPIURL = f.String("acuity-api-url", []string{envAcuityAPIURL}, acuity.DefaultAPIURL,
		"Acuity API base URL; appointments are fetched from <url>/appointments/<id>")
	return out
}

// loadProviders builds every provider, configured or not: one without secrets is still served, so that
// its requests get an explicit 401 "no secret configured" rather than a 404 (fail closed, visibly).
func loadProviders(getenv func(string) string, flags providerFlags) (providerConfig, error) {
	c := providerConfig{secrets: map[string]providers.Secrets{}, rebuild: map[string]func(providers.Secrets) providers.Provider{}}
	for _, s := range providerSpecs() {
		secrets := providers.ParseSecrets(getenv(s.secretsEnv))
		var tol time.Duration
		if p := flags.tolerances[s.name]; p != nil {
			tol = *p
		}
		p, refetcher, err := s.build(secrets, tol, flags)
		var ue usageError
		switch {
		case errors.As(err, &ue):
			return c, err // names its own variable
		case err != nil:
			return c, usageErrorf("%s: %w", s.secretsEnv, err)
		}
		c.list = append(c.list, p)
		if refetcher != nil {
			c.refetchers = append(c.refetchers, refetcher)
		}
		c.secrets[s.name] = secrets
		if s.connectable {
			spec := s
			c.rebuild[s.name] = func(other providers.Secrets) providers.Provider {
				p, _, _ := spec.build(other, tol, flags) // built once already with these settings
				return p
			}
		}
		if secrets.Empty() {
			c.unconfigured = append(c.unconfigured, s.name)
		}
	}
	return c, nil
}
