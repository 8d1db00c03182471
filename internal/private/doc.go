// Package private finds dsh's per-user private directory, where it keeps
// what no other user may read or replace: the shells' control channels,
// saved outputs, the HTTP token.
package private
