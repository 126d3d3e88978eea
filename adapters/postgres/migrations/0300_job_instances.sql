-- Work of a dead serve resumes in seconds (issue #36). Each serve registers here under its River
-- client id (river_job.attempted_by) and holds a session-level advisory lock (class 1651, object = id)
-- on a connection of its own: PostgreSQL drops the lock the moment that session ends, so another
-- serve (or the restarted one) knows the instance is dead and puts its running jobs back at once,
-- rather than after River's fixed rescue delay (adapters/jobs/liveness.go).
--
-- process_steps.claimed_by names the instance whose worker holds a requested step's lease, so that a
-- dead instance's leases end with it. data_sent_at is when the email step's message was written up to
-- its final dot (the claim that wrote it): before it nothing can have been sent, after it the
-- message may have been accepted (docs/process-steps.md, "The unknown window").
-- +goose Up
CREATE TABLE job_instances (
    id         serial PRIMARY KEY,
    client_id  text NOT NULL UNIQUE,
    started_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE process_steps ADD COLUMN claimed_by text, ADD COLUMN data_sent_at timestamptz;
