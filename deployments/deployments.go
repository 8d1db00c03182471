// Package deployments holds dsh's shipped deployments. default.yaml is
// embedded in the binary and used when no --deployment is given.
package deployments

import _ "embed"

// DefaultName is how the embedded default deployment is named in messages.
const DefaultName = "default.yaml (embedded)"

// Default is the text of deployments/default.yaml.
//
//go:embed default.yaml
var Default []byte
