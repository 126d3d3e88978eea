package admincmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"bookingledger/adapters/httpapi/auth"
	"bookingledger/adapters/postgres/tokens"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
)

const tokenUsage = `Usage: bookingledger token create --name N --scope read|admin [--expires 90d] [flags]
       bookingledger token list [--json] [flags]
       bookingledger token revoke <id|name> [flags]

Bearer tokens of the admin surface (/api/, /ui/, /admin/; /metrics when BOOKINGLEDGER_METRICS_AUTH=token).
A read token may GET; an admin token may also resolve reconciliation items and open River's job UI.
create prints the token on stdout, once: only its SHA-256 is stored. --expires takes days (90d) or a
Go duration (36h); without it the token does not expire. list shows every token without its secret.
revoke ends a token (and its UI sessions) at once; a revoked token's name can be given to a new one.`

// TokenRow is a token as token list --json prints it.
type TokenRow struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Scope      string     `json:"scope"`
	Status     string     `json:"status"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func tokenStatus(t auth.Token, now time.Time) string {
	switch {
	case t.Revoked():
		return "revoked"
	case t.Expired(now):
		return "expired"
	}
	return "active"
}

func RunToken(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("token", getenv, stderr, tokenUsage)
	dbURL := f.Secret("database-url", []string{cmdline.EnvDatabaseURL, cmdline.EnvDatabaseURLFallback}, "PostgreSQL URL")
	name := f.String("name", []string{"BOOKINGLEDGER_TOKEN_NAME"}, "", "create: the token's name (who resolutions are recorded as)")
	scope := f.String("scope", []string{"BOOKINGLEDGER_TOKEN_SCOPE"}, "", "create: read or admin")
	expires := f.String("expires", []string{"BOOKINGLEDGER_TOKEN_EXPIRES"}, "", "create: lifetime, e.g. 90d or 36h (default: no expiry)")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "list: print JSON")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return cmdline.UsageErrorf("token wants an action: create, list or revoke")
	}
	var (
		sc  auth.Scope
		ttl time.Duration
	)
	switch pos[0] {
	case "create":
		if len(pos) != 1 {
			return cmdline.UsageErrorf("token create takes no arguments, got %q (use --name and --scope)", pos[1:])
		}
		if err := auth.ValidateName(*name); err != nil {
			return cmdline.UsageErrorf("token create: --name: %w", err)
		}
		if sc, err = auth.ParseScope(*scope); err != nil {
			return cmdline.UsageErrorf("token create: --scope %q: want read or admin", *scope)
		}
		if *expires != "" {
			if ttl, err = auth.ParseLifetime(*expires); err != nil {
				return cmdline.UsageErrorf("token create: --expires: %w", err)
			}
		}
	case "list":
		if len(pos) != 1 {
			return cmdline.UsageErrorf("token list takes no arguments, got %q", pos[1:])
		}
	case "revoke":
		if len(pos) != 2 {
			return cmdline.UsageErrorf("token revoke wants one token id or name, got %q", pos[1:])
		}
	default:
		return cmdline.UsageErrorf("token: unknown action %q (want create, list or revoke)", pos[0])
	}
	if pos[0] != "create" {
		if err := cmdline.OnlyFor(f, "token "+pos[0], "create", "name", "scope", "expires"); err != nil {
			return err
		}
	}
	pool, err := ledgerdb.OpenMigratedPool(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := tokens.New(pool)
	now := time.Now().UTC()

	switch pos[0] {
	case "create":
		return createToken(ctx, store, *name, sc, ttl, now, stdout, stderr)
	case "revoke":
		t, err := store.Revoke(ctx, pos[1], now)
		if errors.Is(err, auth.ErrNotFound) {
			return fmt.Errorf("token revoke: %w; see 'bookingledger token list'", err)
		}
		if err != nil {
			return fmt.Errorf("token revoke: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "revoked token %s (%q, scope %s); its UI sessions ended\n", t.ID, t.Name, t.Scope)
		return err
	}
	list, err := store.List(ctx)
	if err != nil {
		return fmt.Errorf("token list: %w", err)
	}
	if *asJSON {
		rows := make([]TokenRow, len(list))
		for i, t := range list {
			rows[i] = TokenRow{ID: t.ID, Name: t.Name, Scope: string(t.Scope), Status: tokenStatus(t, now), CreatedAt: t.CreatedAt,
				ExpiresAt: optTime(t.ExpiresAt), RevokedAt: optTime(t.RevokedAt), LastUsedAt: optTime(t.LastUsedAt)}
		}
		return cmdline.WriteJSON(stdout, map[string]any{"tokens": rows})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSCOPE\tSTATUS\tCREATED\tEXPIRES\tLAST USED")
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Scope, tokenStatus(t, now), stamp(t.CreatedAt), stamp(t.ExpiresAt), stamp(t.LastUsedAt))
	}
	return tw.Flush()
}

// createToken makes and stores a token. The token alone goes to stdout (scripts capture it); what it
// is goes to stderr.
func createToken(ctx context.Context, store *tokens.Store, name string, sc auth.Scope, ttl time.Duration, now time.Time, stdout, stderr io.Writer) error {
	secret, t, err := auth.NewToken(name, sc, now, ttl)
	if err != nil {
		return cmdline.UsageErrorf("token create: %w", err)
	}
	if err := store.Create(ctx, t); err != nil {
		return fmt.Errorf("token create: %w", err)
	}
	exp := "never expires"
	if !t.ExpiresAt.IsZero() {
		exp = "expires " + t.ExpiresAt.Format(time.RFC3339)
	}
	fmt.Fprintf(stderr, "created token %s %q: scope %s, %s. It is shown only this once; store it now.\n", t.ID, t.Name, t.Scope, exp)
	_, err = fmt.Fprintln(stdout, secret)
	return err
}
