// Package providertest holds test helpers shared by the provider packages' tests and fuzz targets:
// reading testdata, and the properties every Verify and Map result must have whatever the input.
//
// It is imported by _test files only. It imports adapters/providers, adapters/eventcodec (every mapped
// event must encode), the domain and testify; it must not import any provider package, HTTP server,
// database or event store.
package providertest
