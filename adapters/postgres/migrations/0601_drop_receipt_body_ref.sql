-- receipt_body_ref (migration 0031) stored plain bodies; receipt_body_put (0131, 0600) replaced it and
-- nothing has called it since. Dropped, so that the schema holds one way to store a body.
-- +goose Up

DROP FUNCTION IF EXISTS receipt_body_ref(bytea);
