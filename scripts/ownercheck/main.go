// Command ownercheck is make lint's check that every table has one owner: no Go string literal
// outside a table's owning package names it in SQL (FROM, JOIN, INTO, UPDATE, TABLE, TRUNCATE), and
// every table of adapters/postgres/schema.sql has an owner here. Test files are not checked: tests
// look at any table. Run from the module root: go run ./scripts/ownercheck
package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// owners maps each table to the one package (directory) whose Go code may name it in SQL.
var owners = map[string]string{
	// The event store and the ledger store: events, receipts and the personal data a delivery carries.
	"events":            "adapters/postgres",
	"streams":           "adapters/postgres",
	"receipts":          "adapters/postgres",
	"receipt_bodies":    "adapters/postgres",
	"contacts":          "adapters/postgres",
	"seat_contacts":     "adapters/postgres",
	"schema_migrations": "adapters/postgres",

	"api_tokens":  "adapters/postgres/tokens",
	"ui_sessions": "adapters/postgres/tokens",

	"projection_checkpoints": "adapters/postgres/checkpoint",

	"calendar_bookings":       "adapters/postgres/readmodel",
	"calendar_booking_refs":   "adapters/postgres/readmodel",
	"calendar_resources":      "adapters/postgres/readmodel",
	"calendar_resource_links": "adapters/postgres/readmodel",
	"calendar_slots":          "adapters/postgres/readmodel",
	"payment_streams":         "adapters/postgres/readmodel",
	"payment_stream_refs":     "adapters/postgres/readmodel",
	"reconciliation_items":    "adapters/postgres/readmodel",

	"free_texts":      "adapters/privacy",
	"subject_keys":    "adapters/privacy",
	"erasures":        "adapters/privacy",
	"erased_subjects": "adapters/privacy",

	"job_instances":         "adapters/jobs",
	"process_steps":         "adapters/postgres/stepstore",
	"process_step_finishes": "adapters/postgres/stepstore",

	"provider_alerts":        "adapters/providersync",
	"provider_secrets":       "adapters/providersync",
	"provider_subscriptions": "adapters/providersync",
	"provider_sync_state":    "adapters/providersync",

	"relay_alerts":            "adapters/postgres/relaystore",
	"relay_attempts":          "adapters/postgres/relaystore",
	"relay_deliveries":        "adapters/postgres/relaystore",
	"relay_endpoints":         "adapters/postgres/relaystore",
	"relay_endpoint_rules":    "adapters/postgres/relaystore",
	"relay_operational_sends": "adapters/postgres/relaystore",
	"relay_replays":           "adapters/postgres/relaystore",
}

// exemption lets package name table although it does not own it.
type exemption struct{ pkg, table, why string }

// exemptions are the readers and writers not moved to their table's owner yet, each with why.
var exemptions = []exemption{
	// One statement, by design: the ledger's commit saves a delivery's free texts in the statement
	// that appends its events (adapters/postgres/personal.go), without a round trip of its own.
	{"adapters/postgres", "free_texts", "saved in the commit's one statement"},
	// The same for a body's data key and the erasure check of the subjects the commit writes
	// (adapters/postgres/commit.go: bodyCTEs, erasedCTE), which were a PL/pgSQL call per row before
	// (issue #33).
	{"adapters/postgres", "subject_keys", "saved with the body in the commit's one statement"},
	{"adapters/postgres", "erased_subjects", "looked up in the commit's one statement"},
}

var sqlTableRE = regexp.MustCompile(`(?i)\b(?:FROM|JOIN|INTO|UPDATE|TABLE|TRUNCATE)\s+(?:ONLY\s+|IF\s+(?:NOT\s+)?EXISTS\s+)?([a-z_][a-z0-9_]*)\b`)

func main() {
	var problems []string
	tables, err := schemaTables("adapters/postgres/schema.sql")
	if err != nil {
		fmt.Fprintln(os.Stderr, "ownercheck:", err)
		os.Exit(2)
	}
	for _, t := range tables {
		if _, ok := owners[t]; !ok {
			problems = append(problems, fmt.Sprintf("table %s (adapters/postgres/schema.sql) has no owner in scripts/ownercheck", t))
		}
	}
	exempt := map[[2]string]bool{}
	for _, e := range exemptions {
		exempt[[2]string{e.pkg, e.table}] = true
	}
	used := map[[2]string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, m := range sqlTableRE.FindAllStringSubmatch(s, -1) {
				t := m[1]
				owner, ok := owners[t]
				if !ok || owner == pkg {
					continue
				}
				if exempt[[2]string{pkg, t}] {
					used[[2]string{pkg, t}] = true
					continue
				}
				problems = append(problems, fmt.Sprintf("%s: names table %s, which %s owns: go through its owner", fset.Position(lit.Pos()), t, owner))
			}
			return true
		})
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ownercheck:", err)
		os.Exit(2)
	}
	for _, e := range exemptions {
		if !used[[2]string{e.pkg, e.table}] {
			problems = append(problems, fmt.Sprintf("exemption %s -> %s is not needed any more: remove it from scripts/ownercheck", e.pkg, e.table))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		fmt.Fprintln(os.Stderr, "lint: table owners (scripts/ownercheck):")
		for i, p := range problems {
			if i > 0 && problems[i-1] == p {
				continue
			}
			fmt.Fprintln(os.Stderr, "  "+p)
		}
		os.Exit(1)
	}
}

var createTableRE = regexp.MustCompile(`^CREATE (?:UNLOGGED )?TABLE (?:public\.)?([a-z_][a-z0-9_]*) `)

// schemaTables lists the tables schema.sql creates.
func schemaTables(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := createTableRE.FindStringSubmatch(sc.Text()); m != nil {
			out = append(out, m[1])
		}
	}
	return out, sc.Err()
}
