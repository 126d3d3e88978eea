package providers

import (
	"github.com/google/uuid"

	"bookingledger/domain/eventlog"
)

// Namespace is the UUIDv5 namespace of every bookingledger event ID.
//
// It must never change: every stored event ID was derived from it, and a redelivery is recognised as a
// duplicate only because it derives the same ID again. Changing it would append every redelivered or
// replayed event a second time.
const Namespace = "5b0b6522-6855-4b4e-a0a9-3a7d1538f4c7"

// EventID derives the event ID of a provider event: UUIDv5 (SHA-1) over Namespace with the name
// "<provider>:<identity>". The identity must be stable across retries of one change and differ between
// genuinely different changes; each provider package documents its identity.
func EventID(provider, identity string) eventlog.EventID {
	return eventlog.EventID(eventlog.UUIDv5(uuid.MustParse(Namespace), []byte(provider+":"+identity)))
}
