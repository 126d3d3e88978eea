package plantest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Trace is a pgx tracer (a pool's ConnConfig.Tracer) that collects, while On is set, the statements
// sent with their arguments, and the settings any statement set.
type Trace struct {
	On atomic.Bool
	// Naming keeps only the statements that name one of these (every statement when empty).
	Naming []string
	// Max is how many executions of each statement are kept (at least one): their arguments differ
	// (one booking, several, a chain).
	Max int

	mu   sync.Mutex
	got  []Statement
	seen map[string]int // statement → executions kept
	set  []string       // without LOCAL
}

func (tr *Trace) add(sql string, args []any) {
	if !tr.On.Load() {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, part := range strings.Split(sql, ";") {
		f := strings.Fields(part)
		if len(f) < 2 || !strings.EqualFold(f[0], "set") {
			continue
		}
		if f = f[1:]; strings.EqualFold(f[0], "local") {
			f = f[1:]
		}
		if s := strings.Join(f, " "); !slices.Contains(tr.set, s) {
			tr.set = append(tr.set, s)
		}
	}
	// Transaction control and scripts of several statements (the simple protocol) are never planned
	// as prepared statements.
	f := strings.Fields(sql)
	if len(f) == 0 || strings.Contains(sql, ";") || slices.Contains([]string{"begin", "commit", "rollback"}, strings.ToLower(f[0])) {
		return
	}
	if len(tr.Naming) > 0 && !slices.ContainsFunc(tr.Naming, func(n string) bool { return strings.Contains(sql, n) }) {
		return
	}
	if tr.seen == nil {
		tr.seen = map[string]int{}
	}
	if tr.seen[sql] >= max(tr.Max, 1) {
		return
	}
	tr.seen[sql]++
	tr.got = append(tr.got, Statement{SQL: sql, Args: append([]any(nil), args...)})
}

// Statements returns the statements collected, in the order they were first sent.
func (tr *Trace) Statements() []Statement {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.got)
}

// Text returns the statements collected, one after the other, for a test to check that its scenario
// sent the statements it means to explain.
func (tr *Trace) Text() string {
	var b strings.Builder
	for _, s := range tr.Statements() {
		b.WriteString(s.SQL + "\n")
	}
	return b.String()
}

// Settings returns the settings the statements set ("name = value").
func (tr *Trace) Settings() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.set)
}

func (tr *Trace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	tr.add(d.SQL, d.Args)
	return ctx
}
func (tr *Trace) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (tr *Trace) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (tr *Trace) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	tr.add(d.SQL, d.Args)
}
func (tr *Trace) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

var _ pgx.QueryTracer = (*Trace)(nil)
var _ pgx.BatchTracer = (*Trace)(nil)
