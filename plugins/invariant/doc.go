// Package invariant is the `invariants` service (plugin `invariant`):
// packages register named checks over their observable state, and the
// service runs them after every tool call and when a package unloads. A
// violation is logged with its package and name and fails the call: an
// invariant that breaks must be loud, never a warning in a log nobody
// reads.
//
// # Packages and companions
//
// Each package that has state worth checking ships a companion plugin,
// named after it with "-invariant" (terminal-invariant,
// terminal-bash-invariant, tool-bash-persistent-invariant), that injects
// `invariants` and what it observes, and registers its checks under the
// package's import path. `dsh serve --check-invariants` adds the service
// and the companions of the deployment's plugins; the test suites load
// them always.
//
// Checks relate observations, over time where it matters, rather than
// restate types: "a session id never names two sessions" keeps what it
// saw between runs. A check returns nil, or an error that says what it
// saw.
//
// # Selection
//
// The config mirrors the original's: enabled, and regular expressions
// (unanchored, case-sensitive) that allow or block packages by name; the
// blocklist wins. A package that is not selected still reserves its name,
// so two plugins cannot claim the same one.
package invariant
