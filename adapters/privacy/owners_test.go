package privacy_test

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/privacy"
	"bookingledger/adapters/process"
)

// owners are the tables' owners an erasure calls, as serve wires them.
func owners(pool *pgxpool.Pool) privacy.Owners {
	store := postgres.NewStore(pool)
	return privacy.Owners{Receipts: store, Contacts: store, Steps: process.EraseSteps, CalendarRows: readmodel.EraseCancelReasons}
}
