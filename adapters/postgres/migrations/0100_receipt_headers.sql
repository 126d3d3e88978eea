-- Receipt headers (issue 11): the request headers the ingress keeps with a receipt, so that an operator
-- inspecting a quarantined, deferred or rejected delivery sees how it was sent and signed. Which
-- headers are kept is the ingress's allowlist (adapters/httpapi/headers.go): never credentials or
-- client addresses. One "Name: value" line per header value (ledger.HeaderLines), in the order shown;
-- a column of its own, apart from the body (receipt_body_ref), whose storage is encrypted separately.
-- Receipts stored before have none.
-- +goose Up

ALTER TABLE receipts ADD COLUMN headers text[] NOT NULL DEFAULT '{}';
