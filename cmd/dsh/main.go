// Command dsh runs the dsh plugin host: it loads a deployment of plugins and
// puts their tools in front of agents (MCP), people (REPL) and scripts.
package main

import (
	"fmt"
	"os"

	"github.com/dshdev/dsh/internal/harden"
	_ "github.com/dshdev/dsh/plugins/standard"
)

func main() {
	if err := harden.NotDumpable(); err != nil {
		fmt.Fprintln(os.Stderr, "dsh:", err)
		os.Exit(1)
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
