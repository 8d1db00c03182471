// Package catalog holds dsh's generated catalogs: tool-catalog.md and .json,
// config-catalog.md and .json, and deployment.schema.json. They are made by
// cmd/gencatalog from the registered plugins and the default deployment;
// the test in this package fails when they are stale.
package catalog

// The field comments come from internal/schema's generated comments, which
// go first.
//go:generate go generate ../internal/schema
//go:generate go run ../cmd/gencatalog -out .
