-- Bearer tokens of the admin surface (/api/, /ui/, /admin/) and the UI's sessions
-- (docs/operations/ui-and-tokens.md). A token's secret is never stored: only its SHA-256, compared in
-- constant time by adapters/httpapi/auth. Revoked tokens stay, so that "who resolved this" keeps a
-- meaning; a name is unique among tokens not revoked, so `token revoke <name>` names one.
-- +goose Up

CREATE TABLE api_tokens (
    id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{12}$'),
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    scope text NOT NULL CHECK (scope IN ('read', 'admin')),
    secret_sha256 bytea NOT NULL CHECK (length(secret_sha256) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    revoked_at timestamptz,
    last_used_at timestamptz
);

CREATE UNIQUE INDEX api_tokens_active_name_idx ON api_tokens (name) WHERE revoked_at IS NULL;

-- A signed-in browser: the hash of its cookie, bound to the token it signed in with, so that revoking
-- the token ends its sessions (the lookup joins api_tokens and checks it every request).
CREATE TABLE ui_sessions (
    cookie_sha256 bytea PRIMARY KEY CHECK (length(cookie_sha256) = 32),
    token_id text NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE INDEX ui_sessions_expires_at_idx ON ui_sessions (expires_at);

-- Who closed an item, when an operator did: the name of the token (API, UI) or of the CLI user.
-- closed_by stays 'operator' or 'auto' (the read model's rules branch on it).
ALTER TABLE reconciliation_items ADD COLUMN resolved_by text NOT NULL DEFAULT '';
