// Package erasureapi is the admin API of erasure on request (docs/operations/personal-data.md, ADR
// 0015): POST /api/admin/erasures erases (or, with dry_run, lists) the personal data of a booking or of
// every booking of an e-mail address; GET lists the subject.erased facts. It mounts on the admin
// surface's auth.Routes, whose policy makes everything under /api/admin/ need the admin scope. It answers with the read API's
// JSON writer and error body; it imports adapters/privacy and must not import the ingress.
package erasureapi
