// Package gcfloor gives the garbage collector a floor of headroom.
//
// With Go's default GOGC=100, the heap may grow to twice the live heap
// before a collection, and never less than 4 MiB. A dsh serving one agent
// has a live heap of about a megabyte, and every MCP message allocates
// tens of kilobytes in the SDK's JSON decoder. So the collector ran about
// every ten calls and took a third of dsh's CPU per call.
//
// Start keeps the heap goal at least Headroom above the live heap: GOGC is
// raised while the live heap is small, and is back at the default once the
// live heap is large (a thousand sessions), where twice the live heap is
// more headroom than that anyway. The headroom is garbage that may wait to
// be collected, not memory in use; an idle server allocates nothing and
// grows nothing. An operator who set GOGC or GOMEMLIMIT keeps their own
// setting.
package gcfloor
