-- The steps gauge (bookingledger_process_steps{kind,state}) counted every step at every scrape:
-- `SELECT kind, state, count(*) FROM process_steps GROUP BY kind, state` reads the whole table, about
-- two rows per booking ever planned (550–610 ms of a database core per scrape at 2,000,000 steps on a
-- 2-core machine), on every instance, and nears the gauges' 3 s timeout as the history grows (issue
-- #33: the whole serve's cost as shipped).
--
-- What is open (pending, requested, needs_reconciliation) is few rows and already indexed
-- (process_steps_open_idx): the gauge keeps counting it there. What is finished (done, failed,
-- skipped) is counted as it changes: every step that enters or leaves a finished state adds a row of
-- +1 or -1 to process_step_finishes, in the transaction that changed it, so the sums are exact in
-- every snapshot. The rows are only inserted (no row is a counter many transactions update, so
-- concurrent workers never wait for each other here); serve's step sweeper folds them into one row
-- per kind and state when they pile up (stepstore.FoldFinishes).
--
-- The triggers fire only for those transitions (their WHEN conditions are checked before any
-- function is called): a step's claim (pending → requested) costs nothing more, its outcome one row.
-- +goose Up
-- No key and no index: its rows are only inserted, summed whole and folded whole.
CREATE TABLE process_step_finishes (
    kind text NOT NULL,
    state text NOT NULL CHECK (state IN ('done', 'failed', 'skipped')),
    n bigint NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION bl_count_step_finishes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.state IN ('done', 'failed', 'skipped') THEN
        INSERT INTO process_step_finishes (kind, state, n) VALUES (OLD.kind, OLD.state, -1);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.state IN ('done', 'failed', 'skipped') THEN
        INSERT INTO process_step_finishes (kind, state, n) VALUES (NEW.kind, NEW.state, 1);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION bl_step_finishes_truncated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM process_step_finishes;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- CREATE TRIGGER waits for the transactions writing process_steps and holds off new ones until this
-- migration commits, so the sums below count every step once: before the triggers or by them.
CREATE TRIGGER process_steps_finished_insert AFTER INSERT ON process_steps
    FOR EACH ROW WHEN (NEW.state IN ('done', 'failed', 'skipped'))
    EXECUTE FUNCTION bl_count_step_finishes();
CREATE TRIGGER process_steps_finished_update AFTER UPDATE OF kind, state ON process_steps
    FOR EACH ROW WHEN ((OLD.kind, OLD.state) IS DISTINCT FROM (NEW.kind, NEW.state)
        AND (OLD.state IN ('done', 'failed', 'skipped') OR NEW.state IN ('done', 'failed', 'skipped')))
    EXECUTE FUNCTION bl_count_step_finishes();
CREATE TRIGGER process_steps_finished_delete AFTER DELETE ON process_steps
    FOR EACH ROW WHEN (OLD.state IN ('done', 'failed', 'skipped'))
    EXECUTE FUNCTION bl_count_step_finishes();
CREATE TRIGGER process_steps_finished_truncate AFTER TRUNCATE ON process_steps
    FOR EACH STATEMENT EXECUTE FUNCTION bl_step_finishes_truncated();

INSERT INTO process_step_finishes (kind, state, n)
SELECT kind, state, count(*) FROM process_steps WHERE state IN ('done', 'failed', 'skipped') GROUP BY kind, state;

-- +goose Down
DROP TRIGGER process_steps_finished_truncate ON process_steps;
DROP TRIGGER process_steps_finished_delete ON process_steps;
DROP TRIGGER process_steps_finished_update ON process_steps;
DROP TRIGGER process_steps_finished_insert ON process_steps;
DROP FUNCTION bl_step_finishes_truncated();
DROP FUNCTION bl_count_step_finishes();
DROP TABLE process_step_finishes;
