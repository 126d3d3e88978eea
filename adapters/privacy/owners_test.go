package privacy_test

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/privacy"
)

// owners are the tables' owners an erasure calls, as serve wires them.
func owners(pool *pgxpool.Pool) privacy.Owners {
	store := postgres.NewStore(pool)
	return privacy.Owners{Receipts: store, Contacts: store, Steps: stepstore.EraseSteps, CalendarRows: readmodel.EraseCancelReasons}
}
