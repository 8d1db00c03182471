// Command dsh runs the dsh plugin host: it loads a deployment of plugins and
// puts their tools in front of agents (MCP), people (REPL) and scripts.
package main

import (
	"os"

	_ "github.com/dshdev/dsh/plugins/standard"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
