// Package relaystore is the one package that names the relay's tables (relay_endpoints,
// relay_endpoint_rules, relay_deliveries, relay_attempts, relay_alerts, relay_operational_sends,
// relay_replays): typed functions over them, and the value types the relay's callers read (endpoints,
// deliveries and their attempts, alerts, operational sends, replays). Statements that belong to a
// transaction of the relay's take its pgx.Tx; the others run on the Store's pool, and so do the
// transactions that are the relay's sequences of statements: a round's admission (AdmitRound) and
// recording (RecordRound, Retried after a deadlock), a streak's count (CountAttempt), a replay
// (StartReplay) and its backfill, a page of the log at a time (EachBackfill, Backfill). Where such a
// transaction also needs River jobs, the relay passes an enqueue callback that inserts them in it.
//
// It decides nothing: the relay's rules are projections/relay's (where a sequence of statements
// records one of them — Admit, OpenBreaker — that package decides), its workers, River jobs and HTTP
// sends adapters/relay's, which calls this package. It imports pgx, domain/eventlog and
// projections/relay only.
package relaystore
