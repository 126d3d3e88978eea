-- The operator UI's inbox lists the failed steps at every load (`WHERE state = 'failed' ORDER BY id
-- DESC LIMIT 1000`), and `bookingledger steps --state failed` does too. No index held them:
-- PostgreSQL scanned the whole of process_steps, about two rows per booking ever planned (230 ms and
-- three processes at 2,000,000 steps on a 2-core machine), for the few that failed. A failed step
-- stays failed until an operator resolves its item (mark-done, retry or skip all move it), so this
-- index holds the backlog of failures only, as process_steps_open_idx holds the steps not finished.
-- +goose Up
CREATE INDEX process_steps_failed_idx ON process_steps (id) WHERE state = 'failed';

-- +goose Down
DROP INDEX process_steps_failed_idx;
