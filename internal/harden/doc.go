// Package harden holds the process-wide protections dsh's executables turn
// on at start, before any shell exists.
package harden
