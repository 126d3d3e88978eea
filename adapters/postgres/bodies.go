package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"bookingledger/domain/ledger"
)

// ErrBodySealed: a sealed body was read by a store without a sealer.
var ErrBodySealed = errors.New("receipt body is encrypted: set BOOKINGLEDGER_MASTER_KEY to read it")

// WithBodySealer seals every body this store writes and opens every body it reads.
func (s *Store) WithBodySealer(b ledger.BodySealer) *Store {
	s.sealer = b
	return s
}

// Sealer returns the store's body sealer (nil when bodies are kept as they came), for the other
// writers of receipts (the job queue's deferred receipts).
func (s *Store) Sealer() ledger.BodySealer { return s.sealer }

// commitReq is one delivery queued for a group commit, its body already sealed.
type commitReq struct {
	ledger.Commit
	body bodyRow
}

// ReceiptSubject is whose a receipt's body is: the booking of its first event, or the booking a
// deferred receipt waits for; a body naming no booking (quarantined, ignored) is a subject of its own.
func ReceiptSubject(r ledger.Receipt) string {
	switch {
	case len(r.Events) > 0:
		return string(r.Events[0].Booking)
	case r.Booking != "":
		return string(r.Booking)
	}
	return "delivery:" + r.Provider + ":" + r.DeliveryID
}

func (s *Store) bodyOf(r ledger.Receipt) (bodyRow, error) {
	if r.Outcome == ledger.OutcomeRejected {
		return bodyRow{}, nil // an unverified body is never stored
	}
	return prepareBody(s.sealer, ReceiptSubject(r), r.Body)
}

// bodyRow is a body ready for storage: bodyOfParamsCTE's six arguments. The zero bodyRow is no body.
type bodyRow struct {
	sealed, digest []byte
	keyID          pgtype.UUID
	subject, kekID pgtype.Text
	wrapped        []byte
}

// subjects is the body's subject, if it has one, as lockSubjectsSQL's argument.
func (b bodyRow) subjects() []string {
	if !b.subject.Valid {
		return []string{}
	}
	return []string{b.subject.String}
}

func (b bodyRow) args() []any {
	return []any{b.sealed, b.digest, b.keyID, b.subject, b.kekID, b.wrapped}
}

// prepareBody seals body with sealer for subject when sealer is set: the one place a body is
// prepared for storage.
func prepareBody(sealer ledger.BodySealer, subject string, body []byte) (bodyRow, error) {
	if body == nil {
		return bodyRow{}, nil
	}
	if sealer == nil {
		d := sha256.Sum256(body)
		return bodyRow{sealed: body, digest: d[:]}, nil
	}
	sb, err := sealer.SealBody(subject, body)
	if err != nil {
		return bodyRow{}, err
	}
	return bodyRow{sealed: sb.Data, digest: sb.Digest[:], keyID: pgtype.UUID{Bytes: sb.KeyID, Valid: true},
		subject: pgtype.Text{String: sb.Subject, Valid: true}, kekID: pgtype.Text{String: sb.KEKID, Valid: true},
		wrapped: sb.Wrapped}, nil
}

// openBody opens a receipt's stored body; erasedAt is its erased_at (migration 0600), nil when the
// body was not erased.
func (s *Store) openBody(ctx context.Context, sr *StoredReceipt, digest []byte, erasedAt *time.Time) error {
	body := sr.Receipt.Body
	if body == nil {
		return nil
	}
	if erasedAt != nil {
		sr.Receipt.Body, sr.Body = nil, ledger.BodyState{Erased: true, ErasedAt: erasedAt.UTC()}
		return nil
	}
	if s.sealer == nil {
		if IsSealedForm(body) {
			sr.Receipt.Body, sr.Body = nil, ledger.BodyState{Sealed: true}
			return nil
		}
		sr.Body = ledger.BodyState{Plain: body}
		return nil
	}
	st, err := s.sealer.OpenBody(ctx, digest, body)
	if err != nil {
		return err
	}
	sr.Receipt.Body, sr.Body = st.Plain, st
	return nil
}

// IsSealedForm reports whether stored is a sealed body.
func IsSealedForm(stored []byte) bool { return bytes.HasPrefix(stored, []byte(ledger.SealedPrefix)) }

// ErasedForm is the tombstone that replaces the bodies of a subject erased at t. It is what an erased
// body holds, never how one is recognised: erased_at says that (migration 0600).
func ErasedForm(t time.Time) []byte { return []byte("\x00ble1" + t.UTC().Format(time.RFC3339)) }
