// Package dshcmd is dsh's command line (serve, repl, check, tools, call,
// version) as a library: Main runs it with whatever plugins the binary
// links. cmd/dsh is Main with the plugins that ship with dsh
// (plugins/standard); a binary of your own imports its plugins beside
// them:
//
//	package main
//
//	import (
//		dshcmd "github.com/dshdev/dsh/cmd"
//		_ "github.com/dshdev/dsh/plugins/standard"
//		_ "example.com/you/dsh-plugins/mytool"
//	)
//
//	func main() { dshcmd.Main() }
package dshcmd
