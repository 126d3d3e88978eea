package ledgerdb

import (
	"bookingledger/adapters/postgres/stepstore"
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/privacy"
	"bookingledger/cmd/bookingledger/internal/cmdline"
)

// LoadKeyring reads BOOKINGLEDGER_MASTER_KEY; a missing or malformed one is a configuration error.
func LoadKeyring(getenv func(string) string) (*privacy.Keyring, error) {
	ring, err := privacy.ParseKeyring(getenv(privacy.EnvMasterKey))
	if err != nil {
		return nil, cmdline.UsageErrorf("%v", err)
	}
	return ring, nil
}

// OpenBodies is the sealer of receipt bodies on pool, checked against the stored data keys: a master
// key that is missing or wrong for them fails here, before anything is read or written.
func OpenBodies(ctx context.Context, pool *pgxpool.Pool, ring *privacy.Keyring) (*privacy.Bodies, error) {
	b := privacy.NewBodies(pool, ring)
	if err := b.Check(ctx); err != nil {
		return nil, fmt.Errorf("master key check: %w", err)
	}
	return b, nil
}

// SealReceipts makes store open (and seal) bodies when a master key is configured; readers without one
// see sealed bodies as sealed. Commands that write bodies (serve) require the key instead.
func SealReceipts(ctx context.Context, pool *pgxpool.Pool, store *postgres.Store, masterKey string) error {
	if strings.TrimSpace(masterKey) == "" {
		return nil
	}
	ring, err := privacy.ParseKeyring(masterKey)
	if err != nil {
		return cmdline.UsageErrorf("%v", err)
	}
	b, err := OpenBodies(ctx, pool, ring)
	if err != nil {
		return err
	}
	store.WithBodySealer(b)
	return nil
}

// ErasureOwners are the owners of the tables an erasure changes besides privacy's own: the receipts
// and contacts (adapters/postgres), the process steps and the calendar rows.
func ErasureOwners(pool *pgxpool.Pool) privacy.Owners {
	store := postgres.NewStore(pool)
	return privacy.Owners{Receipts: store, Contacts: store, Steps: stepstore.EraseSteps, CalendarRows: readmodel.EraseCancelReasons}
}
