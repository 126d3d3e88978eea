package main

import (
	"time"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/standard"
	"bookingledger/adapters/providers/stripe"
)

// providerSpec names a provider's configuration: its secrets variable and, for schemes that sign a
// timestamp, its tolerance variable and default.
type providerSpec struct {
	name       string
	secretsEnv string
	toleranceF string // flag name; "" when the scheme signs no timestamp
	toleranceE string
	toleranceD time.Duration
	build      func(s providers.Secrets, tol time.Duration) (providers.Provider, error)
}

func providerSpecs() []providerSpec {
	return []providerSpec{
		{
			name: calendly.Name, secretsEnv: "BOOKINGLEDGER_CALENDLY_SIGNING_KEYS",
			toleranceF: "calendly-tolerance", toleranceE: "BOOKINGLEDGER_CALENDLY_TOLERANCE", toleranceD: calendly.DefaultTolerance,
			build: func(s providers.Secrets, tol time.Duration) (providers.Provider, error) {
				return calendly.New(s, tol), nil
			},
		},
		{
			// Cal.com signs no timestamp: no tolerance to configure; a replay is a duplicate by event ID.
			name: calcom.Name, secretsEnv: "BOOKINGLEDGER_CALCOM_SECRETS",
			build: func(s providers.Secrets, _ time.Duration) (providers.Provider, error) { return calcom.New(s), nil },
		},
		{
			name: stripe.Name, secretsEnv: "BOOKINGLEDGER_STRIPE_SECRETS",
			toleranceF: "stripe-tolerance", toleranceE: "BOOKINGLEDGER_STRIPE_TOLERANCE", toleranceD: stripe.DefaultTolerance,
			build: func(s providers.Secrets, tol time.Duration) (providers.Provider, error) {
				return stripe.New(s, tol), nil
			},
		},
		{
			name: standard.Name, secretsEnv: "BOOKINGLEDGER_STANDARD_SECRETS",
			toleranceF: "standard-tolerance", toleranceE: "BOOKINGLEDGER_STANDARD_TOLERANCE", toleranceD: standard.DefaultTolerance,
			build: func(s providers.Secrets, tol time.Duration) (providers.Provider, error) {
				p, err := standard.New(s, tol)
				if err != nil {
					return nil, err
				}
				return p, nil
			},
		},
	}
}

type providerConfig struct {
	list         []providers.Provider
	secrets      map[string]providers.Secrets
	unconfigured []string
}

func (c providerConfig) names() []string {
	out := make([]string, len(c.list))
	for i, p := range c.list {
		out[i] = p.Name()
	}
	return out
}

// registerTolerances adds one flag per timestamped scheme and returns the values by provider name.
func registerTolerances(f *envFlags) map[string]*time.Duration {
	out := map[string]*time.Duration{}
	for _, s := range providerSpecs() {
		if s.toleranceF == "" {
			continue
		}
		out[s.name] = f.Duration(s.toleranceF, []string{s.toleranceE}, s.toleranceD,
			"how far a "+s.name+" signature timestamp may lie from this server's clock")
	}
	return out
}

// loadProviders builds every provider, configured or not: one without secrets is still served, so that
// its requests get an explicit 401 "no secret configured" rather than a 404 (fail closed, visibly).
func loadProviders(getenv func(string) string, tolerances map[string]*time.Duration) (providerConfig, error) {
	c := providerConfig{secrets: map[string]providers.Secrets{}}
	for _, s := range providerSpecs() {
		secrets := providers.ParseSecrets(getenv(s.secretsEnv))
		var tol time.Duration
		if p := tolerances[s.name]; p != nil {
			tol = *p
		}
		p, err := s.build(secrets, tol)
		if err != nil {
			return c, usageErrorf("%s: %w", s.secretsEnv, err)
		}
		c.list = append(c.list, p)
		c.secrets[s.name] = secrets
		if secrets.Empty() {
			c.unconfigured = append(c.unconfigured, s.name)
		}
	}
	return c, nil
}
