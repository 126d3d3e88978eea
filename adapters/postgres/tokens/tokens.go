package tokens

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/httpapi/auth"
)

// Store is the token and session store.
type Store struct{ pool *pgxpool.Pool }

var _ auth.Store = (*Store)(nil)

// New returns a store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

const tokenColumns = `id, name, scope, secret_sha256, created_at, expires_at, revoked_at, last_used_at`

// scanToken scans tokenColumns, then extra.
func scanToken(row pgx.Row, extra ...any) (auth.Token, error) {
	var (
		t                   auth.Token
		scope               string
		expires, rev, usedq *time.Time
	)
	if err := row.Scan(append([]any{&t.ID, &t.Name, &scope, &t.SecretHash, &t.CreatedAt, &expires, &rev, &usedq}, extra...)...); err != nil {
		return auth.Token{}, err
	}
	t.Scope = auth.Scope(scope)
	for _, p := range []struct {
		from *time.Time
		to   *time.Time
	}{{expires, &t.ExpiresAt}, {rev, &t.RevokedAt}, {usedq, &t.LastUsedAt}} {
		if p.from != nil {
			*p.to = p.from.UTC()
		}
	}
	t.CreatedAt = t.CreatedAt.UTC()
	return t, nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Create stores a token made by auth.NewToken; auth.ErrNameTaken when an active token has its name.
func (s *Store) Create(ctx context.Context, t auth.Token) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO api_tokens (id, name, scope, secret_sha256, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6)`, t.ID, t.Name, string(t.Scope), t.SecretHash, t.CreatedAt, nullTime(t.ExpiresAt))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "api_tokens_active_name_idx" {
		return fmt.Errorf("create token %q: %w (revoke it first, or pick another name)", t.Name, auth.ErrNameTaken)
	}
	if err != nil {
		return fmt.Errorf("create token %q: %w", t.Name, err)
	}
	return nil
}

// Token returns the token with id, or auth.ErrNotFound.
func (s *Store) Token(ctx context.Context, id string) (auth.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.Token{}, auth.ErrNotFound
	}
	if err != nil {
		return auth.Token{}, fmt.Errorf("token: %w", err)
	}
	return t, nil
}

// List returns every token, revoked ones too, oldest first.
func (s *Store) List(ctx context.Context) ([]auth.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM api_tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	out := []auth.Token{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// Revoke revokes the token whose id, or else whose active name, is ref, and ends its sessions. It
// returns the revoked token; auth.ErrNotFound when no token not yet revoked matches.
func (s *Store) Revoke(ctx context.Context, ref string, at time.Time) (auth.Token, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return auth.Token{}, fmt.Errorf("revoke token: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	t, err := scanToken(tx.QueryRow(ctx, `UPDATE api_tokens SET revoked_at = $2
WHERE id = (SELECT id FROM api_tokens WHERE revoked_at IS NULL AND (id = $1 OR name = $1) ORDER BY id = $1 DESC LIMIT 1)
RETURNING `+tokenColumns, ref, at))
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.Token{}, fmt.Errorf("revoke token %q: %w (no active token has that id or name)", ref, auth.ErrNotFound)
	}
	if err != nil {
		return auth.Token{}, fmt.Errorf("revoke token %q: %w", ref, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM ui_sessions WHERE token_id = $1`, t.ID); err != nil {
		return auth.Token{}, fmt.Errorf("revoke token %q: end sessions: %w", ref, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return auth.Token{}, fmt.Errorf("revoke token %q: %w", ref, err)
	}
	return t, nil
}

// TouchToken records a use; it never moves last_used_at backwards.
func (s *Store) TouchToken(ctx context.Context, id string, at time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE api_tokens SET last_used_at = $2
WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)`, id, at)
	if err != nil {
		return fmt.Errorf("touch token: %w", err)
	}
	return nil
}

// CreateSession stores a session; expired sessions are deleted on the way, which keeps the table as
// small as the number of signed-in browsers.
func (s *Store) CreateSession(ctx context.Context, sess auth.Session) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM ui_sessions WHERE expires_at < $1`, sess.CreatedAt); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO ui_sessions (cookie_sha256, token_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		sess.Hash, sess.TokenID, sess.CreatedAt, sess.ExpiresAt); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// SessionToken returns the session with the cookie hash and its token, or auth.ErrNotFound.
func (s *Store) SessionToken(ctx context.Context, hash []byte) (auth.Session, auth.Token, error) {
	var sess auth.Session
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT t.id, t.name, t.scope, t.secret_sha256, t.created_at, t.expires_at, t.revoked_at,
    t.last_used_at, s.cookie_sha256, s.token_id, s.created_at, s.expires_at
FROM ui_sessions s JOIN api_tokens t ON t.id = s.token_id WHERE s.cookie_sha256 = $1`, hash),
		&sess.Hash, &sess.TokenID, &sess.CreatedAt, &sess.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.Session{}, auth.Token{}, auth.ErrNotFound
	}
	if err != nil {
		return auth.Session{}, auth.Token{}, fmt.Errorf("session: %w", err)
	}
	return sess, t, nil
}

// DeleteSession ends a session (no error when there is none).
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM ui_sessions WHERE cookie_sha256 = $1`, hash); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}
