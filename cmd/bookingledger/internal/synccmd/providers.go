package synccmd

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
	"bookingledger/cmd/bookingledger/internal/cmdline"
)

// ProviderSpec names a provider's configuration: its secrets variable and, for schemes that sign a
// timestamp, its tolerance variable and default. build returns the provider and, when the provider
// can finish deferred deliveries (fetch their data later), the same provider as the job queue's
// refetcher.
type ProviderSpec struct {
	Name       string
	SecretsEnv string
	toleranceF string // flag name; "" when the scheme signs no timestamp
	toleranceE string
	toleranceD time.Duration
	build      func(s providers.Secrets, tol time.Duration, f ProviderFlags) (providers.Provider, jobs.Refetcher, error)
	// connectable: `providers connect` may create this provider's subscriptions with a secret of its
	// own, which serve then verifies with besides the configured ones.
	connectable bool
}

// Acuity's settings beyond its keys: the webhooks carry no data, so the provider fetches appointments.
const (
	EnvAcuityUserID = "BOOKINGLEDGER_ACUITY_USER_ID"
	EnvAcuityAPIURL = "BOOKINGLEDGER_ACUITY_API_URL"
)

// ProviderFlags are the provider settings that are flags (secrets are not): one tolerance per
// timestamped scheme, and Acuity's API user and URL.
type ProviderFlags struct {
	tolerances   map[string]*time.Duration
	acuityUserID *string
	acuityAPIURL *string
}

func ProviderSpecs() []ProviderSpec {
	return []ProviderSpec{
		{
			Name: calendly.Name, SecretsEnv: "BOOKINGLEDGER_CALENDLY_SIGNING_KEYS", connectable: true,
			toleranceF: "calendly-tolerance", toleranceE: "BOOKINGLEDGER_CALENDLY_TOLERANCE", toleranceD: calendly.DefaultTolerance,
			build: func(s providers.Secrets, tol time.Duration, _ ProviderFlags) (providers.Provider, jobs.Refetcher, error) {
				return calendly.New(s, tol), nil, nil
			},
		},
		{
			// Cal.com signs no timestamp: no tolerance to configure; a replay is a duplicate by event ID.
			Name: calcom.Name, SecretsEnv: "BOOKINGLEDGER_CALCOM_SECRETS", connectable: true,
			build: func(s providers.Secrets, _ time.Duration, _ ProviderFlags) (providers.Provider, jobs.Refetcher, error) {
				return calcom.New(s), nil, nil
			},
		},
		{
			// Acuity signs no timestamp either; its API keys verify signatures and authenticate the
			// appointment fetch (with the user id).
			Name: acuity.Name, SecretsEnv: "BOOKINGLEDGER_ACUITY_API_KEYS",
			build: func(s providers.Secrets, _ time.Duration, f ProviderFlags) (providers.Provider, jobs.Refetcher, error) {
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
					return nil, nil, cmdline.UsageErrorf("BOOKINGLEDGER_ACUITY_API_KEYS is set but %s is not (or pass --acuity-user-id): "+
						"appointments are fetched with the user id and the API key", EnvAcuityUserID)
				case err != nil:
					return nil, nil, cmdline.UsageErrorf("%s / --acuity-api-url: %w", EnvAcuityAPIURL, err)
				}
				return p, p, nil
			},
		},
		{
			Name: stripe.Name, SecretsEnv: "BOOKINGLEDGER_STRIPE_SECRETS", connectable: true,
			toleranceF: "stripe-tolerance", toleranceE: "BOOKINGLEDGER_STRIPE_TOLERANCE", toleranceD: stripe.DefaultTolerance,
			build: func(s providers.Secrets, tol time.Duration, _ ProviderFlags) (providers.Provider, jobs.Refetcher, error) {
				return stripe.New(s, tol), nil, nil
			},
		},
		{
			Name: standard.Name, SecretsEnv: "BOOKINGLEDGER_STANDARD_SECRETS",
			toleranceF: "standard-tolerance", toleranceE: "BOOKINGLEDGER_STANDARD_TOLERANCE", toleranceD: standard.DefaultTolerance,
			build: func(s providers.Secrets, tol time.Duration, _ ProviderFlags) (providers.Provider, jobs.Refetcher, error) {
				p, err := standard.New(s, tol)
				if err != nil {
					return nil, nil, err
				}
				return p, nil, nil
			},
		},
	}
}

type ProviderConfig struct {
	list []providers.Provider
	// refetchers finish deferred deliveries: the providers whose specs name them.
	Refetchers   []jobs.Refetcher
	secrets      map[string]providers.Secrets
	Unconfigured []string
	// rebuild makes a provider anew with other secrets (the stored ones of providersync), by name; the
	// providers whose subscriptions `providers connect` manages only.
	rebuild map[string]func(providers.Secrets) providers.Provider
}

func (c ProviderConfig) Names() []string {
	out := make([]string, len(c.list))
	for i, p := range c.list {
		out[i] = p.Name()
	}
	return out
}

// RegisterProviderFlags adds one tolerance flag per timestamped scheme and Acuity's API flags.
func RegisterProviderFlags(f *cmdline.EnvFlags) ProviderFlags {
	out := ProviderFlags{tolerances: map[string]*time.Duration{}}
	for _, s := range ProviderSpecs() {
		if s.toleranceF == "" {
			continue
		}
		out.tolerances[s.Name] = f.Duration(s.toleranceF, []string{s.toleranceE}, s.toleranceD,
			"how far a "+s.Name+" signature timestamp may lie from this server's clock")
	}
	out.acuityUserID = f.String("acuity-user-id", []string{EnvAcuityUserID}, "",
		"Acuity user id: with the API key that verified a webhook, the basic-auth login of the appointment fetch")
	out.acuityAPIURL = f.String("acuity-api-url", []string{EnvAcuityAPIURL}, acuity.DefaultAPIURL,
		"Acuity API base URL; appointments are fetched from <url>/appointments/<id>")
	return out
}

// LoadProviders builds every provider, configured or not: one without secrets is still served, so that
// its requests get an explicit 401 "no secret configured" rather than a 404 (fail closed, visibly).
func LoadProviders(getenv func(string) string, flags ProviderFlags) (ProviderConfig, error) {
	c := ProviderConfig{secrets: map[string]providers.Secrets{}, rebuild: map[string]func(providers.Secrets) providers.Provider{}}
	for _, s := range ProviderSpecs() {
		secrets := providers.ParseSecrets(getenv(s.SecretsEnv))
		var tol time.Duration
		if p := flags.tolerances[s.Name]; p != nil {
			tol = *p
		}
		p, refetcher, err := s.build(secrets, tol, flags)
		var ue cmdline.UsageError
		switch {
		case errors.As(err, &ue):
			return c, err // names its own variable
		case err != nil:
			return c, cmdline.UsageErrorf("%s: %w", s.SecretsEnv, err)
		}
		c.list = append(c.list, p)
		if refetcher != nil {
			c.Refetchers = append(c.Refetchers, refetcher)
		}
		c.secrets[s.Name] = secrets
		if s.connectable {
			spec := s
			c.rebuild[s.Name] = func(other providers.Secrets) providers.Provider {
				p, _, _ := spec.build(other, tol, flags) // built once already with these settings
				return p
			}
		}
		if secrets.Empty() {
			c.Unconfigured = append(c.Unconfigured, s.Name)
		}
	}
	return c, nil
}
