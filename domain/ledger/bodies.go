package ledger

import (
	"context"
	"time"
)

// BodySealer encrypts receipt bodies per subject and opens them again (ADR 0015): the port a Store
// that keeps bodies seals them through, implemented by adapters/privacy.Bodies. A store without one
// keeps bodies as they came: `serve` refuses to start without a master key, so only tests of other
// packages run so.
type BodySealer interface {
	SealBody(subject string, body []byte) (SealedBody, error)
	// OpenBody returns the plain body of a stored one (stored as it came, or sealed); digest is the
	// receipt's body digest, which a sealed body must name.
	OpenBody(ctx context.Context, digest, stored []byte) (BodyState, error)
}

// SealedPrefix starts the stored form of a sealed body: a NUL byte, which no webhook body (JSON, a
// form) starts with.
const SealedPrefix = "\x00bls1"

// SealedBody is a sealed body ready for storage with its data key.
type SealedBody struct {
	Digest  [32]byte // SHA-256 of the plain body: one row per digest, shared by duplicates
	Data    []byte   // the encrypted body, starting with SealedPrefix
	KeyID   [16]byte
	Subject string
	KEKID   string // the master key that wrapped the data key
	Wrapped []byte
}

// BodyState is a stored body as a reader sees it.
type BodyState struct {
	Plain    []byte
	Erased   bool
	ErasedAt time.Time
	// Sealed: encrypted, and this store has no key to open it.
	Sealed bool
}
