// Package schema is dsh's one JSON Schema pipeline: tool arguments and plugin
// configs are Go structs, reflected with invopop/jsonschema into the schema the
// model sees (MCP inputSchema), the catalogs document, and the tools service
// validates against.
//
// Field doc comments are the documentation. A deployed binary has no source
// to read them from, so `go generate` extracts them into comments_gen.go and a
// test fails when that file has drifted from the source.
package schema

//go:generate go run ./gencomments -out comments_gen.go
