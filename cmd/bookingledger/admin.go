package main

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/httpapi/auth"
	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/httpapi/relayapi"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/tokens"
)

// Values of BOOKINGLEDGER_METRICS_AUTH.
const (
	metricsOpen  = "open"
	metricsToken = "token"
)

// adminDeps are what the admin surface (/api/, /ui/, /admin/) is built from.
type adminDeps struct {
	pool              *pgxpool.Pool
	rm                *readmodel.ReadModel
	steps             readapi.StepResolver // resolves process step items (nil: the API refuses actions)
	relay             relayapi.Admin       // the relay's endpoints and deliveries (nil: no relay routes)
	log               *slog.Logger
	reg               prometheus.Registerer
	failuresPerMinute int
}

// admin is the admin surface: its routes, all registered on one auth.Routes, and the authenticator
// that is the only way to serve them.
type admin struct {
	authn  *auth.Authenticator
	routes *auth.Routes
}

// adminPrefixes are the paths of the admin surface; everything under them is served through the
// authenticator, also paths no route matches (they answer 401 before 404).
var adminPrefixes = []string{"/api/"}

// adminRoutes mounts the admin surface next to /metrics on the admin listener, never on the public
// one: whole prefixes, each served by adm.routes behind the authenticator, so that no route under
// them can be mounted open.
func adminRoutes(adm *admin) func(httpapi.Mux) {
	return func(mux httpapi.Mux) {
		protected := adm.authn.Handler(adm.routes)
		for _, p := range adminPrefixes {
			mux.Handle(p, protected)
		}
	}
}

// newAdmin registers every admin route. Serve and the route-table test build it the same way, so the
// test's list of routes is the server's.
func newAdmin(d adminDeps) (*admin, error) {
	authn, err := auth.New(auth.Config{Store: tokens.New(d.pool), Registry: d.reg, Logger: d.log,
		FailuresPerMinute: d.failuresPerMinute})
	if err != nil {
		return nil, err
	}
	routes := auth.NewRoutes()
	readapi.Register(routes, readapi.Deps{Reader: d.rm, Receipts: d.rm, Steps: d.steps, Actor: auth.Actor, Logger: d.log})
	if d.relay != nil {
		relayapi.Register(routes, relayapi.Deps{Relay: d.relay, Logger: d.log})
	}
	return &admin{authn: authn, routes: routes}, nil
}
