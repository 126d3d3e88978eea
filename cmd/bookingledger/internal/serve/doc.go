// Package serve is the serve and migrate commands: serve's configuration (parseServe), the server
// (server.go: openServer builds and starts everything, Run serves the two listeners until
// interrupted and drains them, Close stops the rest in stopOrder), its admin surface, its start-up
// phases, the schema migration, the projections' registry and wiring (projection.go), and rebuild,
// which replays a projection of that registry.
package serve
