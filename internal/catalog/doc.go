// Package catalog builds dsh's generated documentation from the code: the
// tool catalog (each tool as MCP's tools/list gives it), the config
// catalog (every plugin's config fields with types, defaults and doc
// comments, from the one schema pipeline in internal/schema) and a JSON
// Schema for deployment files. cmd/gencatalog writes them to catalog/,
// and a test there fails when they have drifted.
package catalog
