package postgres_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/auth"
	"bookingledger/adapters/privacy"
	"bookingledger/adapters/process"
	"bookingledger/adapters/providersync"
	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
	"bookingledger/projections/calendar"
	"bookingledger/projections/steps"
)

// TestCheckListsEqualTheGoEnums: every CHECK list of values in the migrated schema equals the list the
// owning Go package exports, so that a value renamed or added on one side fails here rather than as
// a constraint violation at run time. A CHECK list without an entry here fails too: give it a Go
// list.
func TestCheckListsEqualTheGoEnums(t *testing.T) {
	t.Parallel()
	pool := spares.Database(t)
	want := map[string][]string{
		"api_tokens.api_tokens_scope_check":                         strs(auth.Scopes),
		"calendar_bookings.calendar_bookings_status_check":          strs(calendar.Statuses),
		"calendar_bookings.calendar_bookings_payment_status_check":  strs(booking.PaymentStatuses),
		"erasures.erasures_kind_check":                              privacy.ErasureKinds,
		"free_texts.free_texts_field_check":                         strs(booking.FreeTextFields),
		"process_steps.process_steps_kind_check":                    strs(process.Kinds),
		"process_steps.process_steps_state_check":                   strs(process.States),
		"process_step_finishes.process_step_finishes_state_check":   strs(steps.Finished),
		"provider_alerts.provider_alerts_kind_check":                providersync.AlertKinds,
		"receipts.receipts_outcome_check":                           strs(ledger.Outcomes),
		"reconciliation_items.reconciliation_items_kind_check":      strs(calendar.ItemKinds),
		"reconciliation_items.reconciliation_items_closed_by_check": calendar.Closers,
		"relay_alerts.relay_alerts_kind_check":                      relay.AlertKinds,
		"relay_deliveries.relay_deliveries_state_check":             relay.States,
		"relay_deliveries.relay_deliveries_held_check":              relay.HeldReasons,
	}
	rows, err := pool.Query(context.Background(), `SELECT c.conrelid::regclass::text || '.' || c.conname, pg_get_constraintdef(c.oid)
FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
WHERE c.contype = 'c' AND n.nspname = 'public' AND pg_get_constraintdef(c.oid) ~ '= ANY \(ARRAY\['
ORDER BY 1`)
	require.NoError(t, err)
	got := map[string][]string{}
	for rows.Next() {
		var name, def string
		require.NoError(t, rows.Scan(&name, &def))
		got[name] = checkValues(def)
	}
	require.NoError(t, rows.Err())
	for name, values := range got {
		w, ok := want[name]
		if !assert.True(t, ok, "CHECK %s lists %q: export the owning package's list and add it here", name, values) {
			continue
		}
		assert.ElementsMatch(t, w, values, "CHECK %s and its Go list", name)
	}
	for name := range want {
		assert.Contains(t, got, name, "a CHECK list of that name")
	}
}

var checkValueRE = regexp.MustCompile(`'((?:[^']|'')*)'::text`)

// checkValues are the values of a "col = ANY (ARRAY['a'::text, …])" constraint.
func checkValues(def string) []string {
	var out []string
	for _, m := range checkValueRE.FindAllStringSubmatch(def, -1) {
		out = append(out, m[1])
	}
	return out
}

func strs[S ~[]E, E ~string](s S) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}
