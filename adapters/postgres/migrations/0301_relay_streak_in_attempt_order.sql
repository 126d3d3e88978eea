-- An endpoint's failure streak follows the attempts' times, not the order their rounds committed
-- (issue #36): rounds of concurrent jobs commit out of attempt order, and a failure older than a
-- success counted after it sent a "failing" alert for an endpoint that had recovered.
-- last_success_at is the end of the latest successful attempt counted, last_failure_at that of the
-- latest failure in the current streak (adapters/relay/alerts.go).
-- +goose Up
ALTER TABLE relay_endpoints ADD COLUMN last_success_at timestamptz, ADD COLUMN last_failure_at timestamptz;
