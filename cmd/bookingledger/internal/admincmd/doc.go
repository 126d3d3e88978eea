// Package admincmd is the operator's commands over the ledger's database: history, calendar,
// reconcile, receipts, token, resources (with the resources file serve applies at start), erase and
// keys.
package admincmd
