package providersync_test

import (
	"bookingledger/adapters/providers/acuity"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/stripe"
	"bookingledger/adapters/providersync"
)

// Every provider's API client is both ports of the sync. The assertions live here, with the ports,
// rather than in the providers' tests: a provider's test binary then stays free of this package's
// PostgreSQL dependencies, which its fuzzing build (instrumented, compiled apart) would compile again.
var (
	_ providersync.Source        = (*acuity.API)(nil)
	_ providersync.Subscriptions = (*acuity.API)(nil)
	_ providersync.Source        = (*calcom.API)(nil)
	_ providersync.Subscriptions = (*calcom.API)(nil)
	_ providersync.Source        = (*calendly.API)(nil)
	_ providersync.Subscriptions = (*calendly.API)(nil)
	_ providersync.Source        = (*stripe.API)(nil)
	_ providersync.Subscriptions = (*stripe.API)(nil)
)
