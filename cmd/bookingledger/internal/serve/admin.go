package serve

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"

	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/httpapi/auth"
	"bookingledger/adapters/httpapi/erasureapi"
	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/httpapi/relayapi"
	"bookingledger/adapters/httpapi/resourceapi"
	"bookingledger/adapters/httpapi/ui"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/postgres/tokens"
	"bookingledger/adapters/process"
	"bookingledger/cmd/bookingledger/internal/stepscmd"
	"bookingledger/domain/ledger"
	"bookingledger/projections/history"
)

// Values of BOOKINGLEDGER_METRICS_AUTH.
const (
	metricsOpen  = "open"
	metricsToken = "token"
)

// jobsPrefix is where River's UI is mounted (admin only: everything under /admin/ needs admin).
const jobsPrefix = "/admin/jobs"

// adminDeps are what the admin surface (/api/, /ui/, /admin/) is built from.
type adminDeps struct {
	pool      *pgxpool.Pool
	rm        *readmodel.ReadModel
	steps     readapi.StepResolver // resolves process step items (nil: the API refuses actions)
	relay     relayapi.Admin       // the relay's endpoints and deliveries (nil: no relay routes)
	links     resourceapi.Links    // linked resources
	eraser    erasureapi.Eraser    // erasure on request (nil: no erasure routes)
	receipts  *postgres.Store
	jobs      *river.Client[pgx.Tx]
	providers []string
	// providerStatus feeds the UI's Providers page (nil: no page).
	providerStatus    func(ctx context.Context) ([]ui.ProviderStatus, error)
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
var adminPrefixes = []string{"/api/", "/ui/", "/admin/"}

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
// test's list of routes is the server's. River's UI runs background queries until ctx ends.
func newAdmin(ctx context.Context, d adminDeps) (*admin, error) {
	authn, err := auth.New(auth.Config{Store: tokens.New(d.pool), Registry: d.reg, Logger: d.log,
		FailuresPerMinute: d.failuresPerMinute})
	if err != nil {
		return nil, err
	}
	routes := auth.NewRoutes()
	readapi.Register(routes, readapi.Deps{Reader: d.rm, Receipts: d.rm, People: d.rm, Steps: d.steps, Actor: auth.Actor, Logger: d.log})
	if d.relay != nil {
		relayapi.Register(routes, relayapi.Deps{Relay: d.relay, Logger: d.log})
	}
	resourceapi.Register(routes, resourceapi.Deps{Links: d.links, Actor: auth.Actor, Logger: d.log})
	if d.eraser != nil {
		erasureapi.Register(routes, erasureapi.Deps{Eraser: d.eraser, Actor: auth.Actor, Logger: d.log})
	}

	jobsUI, err := riverui.NewHandler(&riverui.HandlerOpts{Endpoints: riverui.NewEndpoints(d.jobs, nil),
		Logger: d.log.With("component", "riverui"), Prefix: jobsPrefix})
	if err != nil {
		return nil, fmt.Errorf("river UI: %w", err)
	}
	if err := jobsUI.Start(ctx); err != nil {
		return nil, fmt.Errorf("river UI: %w", err)
	}
	routes.Handle(jobsPrefix+"/", ui.WayBack(jobsUI)) // its pages get a link back to /ui/

	var uiRelay ui.Relay
	if d.relay != nil {
		uiRelay = d.relay
	}
	var uiSteps ui.StepResolver
	if d.steps != nil {
		uiSteps = d.steps
	}
	err = ui.Register(routes, ui.Deps{
		Reader:      d.rm,
		Sessions:    authn,
		Relay:       uiRelay,
		Steps:       uiSteps,
		StepActions: stepscmd.StepActions(),
		Deliveries: func(ctx context.Context, q ui.DeliveryQuery) ([]ui.Delivery, error) {
			rs, err := d.receipts.ListReceipts(ctx, postgres.ReceiptFilter{Provider: q.Provider, Outcome: ledger.Outcome(q.Outcome), BeforeID: q.BeforeID, Limit: q.Limit})
			out := make([]ui.Delivery, len(rs))
			for i, r := range rs {
				out[i] = ui.Delivery{ID: r.ID, Receipt: r.Receipt}
			}
			return out, err
		},
		People: d.rm,
		FailedSteps: func(ctx context.Context) ([]history.StepEntry, error) {
			steps, err := stepstore.NewStore(d.pool, nil).List(ctx, process.StateFailed)
			return stepstore.Entries(steps), err
		},
		Providers:      d.providers,
		ProviderStatus: d.providerStatus,
		Links:          []ui.Link{{Name: "Jobs", Href: jobsPrefix + "/"}},
		Logger:         d.log,
	})
	if err != nil {
		return nil, err
	}
	// A browser's refusals (a read token at an admin page, a forged form) are pages, not JSON.
	authn.SetRefusalPage(ui.WantsPage, ui.Refusal)
	return &admin{authn: authn, routes: routes}, nil
}
