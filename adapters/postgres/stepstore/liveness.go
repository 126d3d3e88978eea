package stepstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"bookingledger/adapters/jobs"
	"bookingledger/adapters/process"
)

// ReleaseLeases is the step kind's jobs.RescueHook: the leases of steps claimed by a dead instance,
// and of steps whose job was put back while its claimer (this instance) no longer runs it, end now,
// in the transaction that makes their jobs available, so that the next attempt takes them over at
// once (a CalDAV step probes; an email step is sent unless its data had ended).
func ReleaseLeases(ctx context.Context, tx pgx.Tx, r jobs.Rescued) error {
	var steps []int64
	var clients []string
	for _, j := range r.Jobs {
		if j.Kind != (process.StepArgs{}).Kind() {
			continue
		}
		var a process.StepArgs
		if err := json.Unmarshal(j.Args, &a); err != nil {
			continue // not ours to read: River's own rescue and the sweep still apply
		}
		steps, clients = append(steps, a.Step), append(clients, j.Client)
	}
	_, err := tx.Exec(ctx, `UPDATE process_steps s SET lease_until = now() - interval '1 second', updated_at = now()
WHERE s.state = 'requested' AND s.lease_until > now() - interval '1 second'
  AND (s.claimed_by = ANY($1)
       OR EXISTS (SELECT 1 FROM unnest($2::bigint[], $3::text[]) AS r(step, client) WHERE r.step = s.id AND r.client = s.claimed_by))`,
		r.Dead, steps, clients)
	if err != nil {
		return fmt.Errorf("process: release leases of dead claims: %w", err)
	}
	return nil
}
