// Package invariant is the `invariants` service (plugin `invariant`):
// named checks over the observable state of plugins, run after every tool
// call and once more when the service unloads. A violation is logged with
// its package and name and fails the call: an invariant that breaks must
// be loud, never a warning in a log nobody reads.
//
// # Where the checks come from
//
// A plugin whose instance has state worth checking implements
// host.Checker (the terminals service, the shell backend, the bash tool
// do): the service finds it among the host's instances and runs its
// checks under the import path of the package that defines the
// instance's type. Code outside a host can also Register a package's
// checks by name. `dsh serve --check-invariants` adds the service to the
// deployment (Augment); the test suites load it always.
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
// blocklist wins. A registered package that is not selected still
// reserves its name, so two callers cannot claim the same one.
package invariant
