// Package resourceapi is the admin API of linked resources (/api/admin/resources): list, show, link
// and unlink, over the domain/resource service, and the JSON documents the CLI prints with --json.
// It is mounted on the admin surface's auth.Routes under /api/admin/, so every route needs an admin
// token; who changed a link is the token's name.
//
// It imports domain/resource and the read API's JSON writer and error body; never a store.
package resourceapi
