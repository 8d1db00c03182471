// Command dsh runs the dsh plugin host: it loads a deployment of plugins and
// puts their tools in front of agents (MCP), people (REPL) and scripts. It
// is the command line of package dshcmd with the plugins that ship with
// dsh; a binary with plugins of its own is the same three lines.
package main

import (
	dshcmd "github.com/dshdev/dsh/cmd"
	_ "github.com/dshdev/dsh/plugins/standard"
)

func main() { dshcmd.Main() }
