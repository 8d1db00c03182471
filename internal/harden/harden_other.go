//go:build !linux

package harden

// NotDumpable does nothing here: dsh's shells run on Linux only, and the
// build says so (see plugins/terminal-bash).
func NotDumpable() error { return nil }
