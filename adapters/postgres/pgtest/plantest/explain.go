package plantest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Statement is one statement a connection sent, with the arguments it was sent with.
type Statement struct {
	SQL  string
	Args []any
}

// ArgsText is the arguments as failure messages show them.
func (s Statement) ArgsText() string {
	parts := make([]string, len(s.Args))
	for i, a := range s.Args {
		parts[i] = fmt.Sprintf("$%d=%v", i+1, a)
	}
	return strings.Join(parts, " ")
}

// Mode says which of a statement's plans to explain.
type Mode string

const (
	// Custom is the plan for the statement's values, which a connection runs at its first five
	// executions of a prepared statement.
	Custom Mode = "custom"
	// Kept is the plan a connection chooses at its sixth execution and keeps: the generic plan when
	// PostgreSQL finds it no dearer than the custom plans so far (always, under
	// plan_cache_mode = force_generic_plan).
	Kept Mode = "kept"
)

// Node is the part of a node of EXPLAIN (FORMAT JSON) the rule reads and failure messages show.
type Node struct {
	NodeType     string `json:"Node Type"`
	RelationName string `json:"Relation Name"`
	FunctionName string `json:"Function Name"`
	IndexName    string `json:"Index Name"`
	IndexCond    string `json:"Index Cond"`
	RecheckCond  string `json:"Recheck Cond"`
	Filter       string `json:"Filter"`
	Plans        []Node `json:"Plans"`
}

// Plan is an explained plan; Kind is "custom" or "generic" for a kept plan, which may be either.
type Plan struct {
	Root Node
	Kind string
}

// String prints the plan as an indented tree of its nodes and conditions.
func (p Plan) String() string {
	var b strings.Builder
	if p.Kind != "" {
		b.WriteString("(" + p.Kind + ")\n")
	}
	p.Root.write(&b, 0)
	return b.String()
}

func (n Node) write(b *strings.Builder, depth int) {
	b.WriteString(strings.Repeat("  ", depth) + "-> " + n.NodeType)
	for _, s := range []struct{ label, v string }{{" on ", n.RelationName}, {" of ", n.FunctionName}, {" using ", n.IndexName},
		{"  Index Cond: ", n.IndexCond}, {"  Recheck Cond: ", n.RecheckCond}, {"  Filter: ", n.Filter}} {
		if s.v != "" {
			b.WriteString(s.label + s.v)
		}
	}
	b.WriteString("\n")
	for _, c := range n.Plans {
		c.write(b, depth+1)
	}
}

// Connect connects to url, closed at the end of the test, with settings set on the session as a
// batch's transaction sets them (each "name = value").
func Connect(t testing.TB, url string, settings ...string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, s := range settings {
		_, err := conn.Exec(ctx, `SET `+s)
		require.NoError(t, err)
	}
	return conn
}

// probeName is the prepared statement a kept plan is explained through; it is deallocated after each.
const probeName = "plantest_probe"

// Explain explains s on conn with its arguments. A kept plan is explained by executing the prepared
// statement six times, which is what makes PostgreSQL compare the generic plan with the custom ones;
// pg_prepared_statements then says which it kept.
func Explain(ctx context.Context, conn *pgx.Conn, mode Mode, s Statement) (Plan, error) {
	var raw []byte
	var plan Plan
	switch mode {
	case Custom:
		if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+s.SQL, s.Args...).Scan(&raw); err != nil {
			return Plan{}, fmt.Errorf("explain: %w", err)
		}
	case Kept:
		defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `DEALLOCATE `+probeName) }()
		args, err := literals(ctx, conn, s)
		if err != nil {
			return Plan{}, err
		}
		for range 6 {
			if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE `+probeName+args).Scan(&raw); err != nil {
				return Plan{}, fmt.Errorf("explain: %w", err)
			}
		}
		if err := conn.QueryRow(ctx, `SELECT CASE WHEN generic_plans > 0 THEN 'generic' ELSE 'custom' END FROM pg_prepared_statements WHERE name = $1`,
			probeName).Scan(&plan.Kind); err != nil {
			return Plan{}, fmt.Errorf("plan kind: %w", err)
		}
	default:
		return Plan{}, fmt.Errorf("unknown plan mode %q", mode)
	}
	var plans []struct {
		Plan Node `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &plans); err != nil || len(plans) != 1 {
		return Plan{}, fmt.Errorf("explain: %d plans, %v: %s", len(plans), err, raw)
	}
	plan.Root = plans[0].Plan
	return plan, nil
}

// literals prepares s as probeName and returns its arguments as EXECUTE takes them (no bound
// parameters): a list of SQL literals of the types PostgreSQL inferred for its parameters, or nothing.
func literals(ctx context.Context, conn *pgx.Conn, s Statement) (string, error) {
	if _, err := conn.Exec(ctx, `PREPARE `+probeName+` AS `+s.SQL); err != nil {
		return "", fmt.Errorf("prepare: %w", err)
	}
	var types []string
	if err := conn.QueryRow(ctx, `SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = $1`, probeName).Scan(&types); err != nil {
		return "", fmt.Errorf("parameter types: %w", err)
	}
	if len(types) != len(s.Args) {
		return "", fmt.Errorf("%d parameters, %d arguments", len(types), len(s.Args))
	}
	if len(types) == 0 {
		return "", nil
	}
	lits := make([]string, len(types))
	for i, typ := range types {
		if err := conn.QueryRow(ctx, `SELECT quote_nullable($1::`+typ+`)`, s.Args[i]).Scan(&lits[i]); err != nil {
			return "", fmt.Errorf("literal of $%d (%s): %w", i+1, typ, err)
		}
		lits[i] += "::" + typ
	}
	return "(" + strings.Join(lits, ", ") + ")", nil
}
