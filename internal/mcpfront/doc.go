// Package mcpfront puts a host's tools in front of MCP clients, over stdio
// and streamable HTTP, with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// A Front is one *mcp.Server whose tools are the host's tools service at
// the time New runs: each tool keeps its name, description and input
// schema exactly (the schema is passed through as raw JSON; the SDK never
// infers one), and every call is routed to host.Tools.Call.
//
// # Sessions and owners
//
// One MCP session is one owner: its own workspace scope and so its own
// shell. The owner is created lazily, by the session's first tools/call, so
// sessions that never call a tool (a discovery probe, a client that only
// lists tools) cost nothing. Its id is "mcp-" and a random string, never
// the Mcp-Session-Id: that is an HTTP session's only credential, and owner
// ids reach the shell's environment (DSH_SESSION_ID) and the logs. Every
// owner works in Options.Workdir.
//
// The owner is closed when its session ends, which closes its shell:
//
//   - stdio: the client closes stdin (EOF) or the Serve context is done;
//   - streamable HTTP: the client sends DELETE, the session has been idle for
//     HTTPOptions.IdleTimeout, or the front closes.
//
// A watcher goroutine per owner waits on ServerSession.Wait and closes the
// owner when it returns; Serve also closes its session's owner before it
// returns, so a stdio server has nothing left running once Serve is done.
// A session whose owner is closed before the SDK ends it (DELETE, Serve's
// context, Close) gets no new owner: its later calls are refused.
//
// # Protocol versions
//
// go-sdk v1.8.0 speaks 2024-11-05 through 2025-11-25 with the initialize
// handshake, and 2026-07-28 (SEP-2575) without one. Over stdio and in-memory
// transports both work the same way here: one connection is one
// ServerSession, whatever the version. Over streamable HTTP the SDK serves
// 2026-07-28 only in Stateless mode, where every request gets a throwaway
// session, which cannot hold a shell across calls. The HTTP handler therefore
// runs stateful: a client that probes with server/discover at 2026-07-28 is
// offered only the legacy versions (the SDK filters them by transport), and
// falls back to initialize at 2025-11-25, which gives it a real session with
// an Mcp-Session-Id. The go-sdk v1.8.0 client does exactly that (see the
// HTTP tests), and the MCP Inspector 2.12.0 (TypeScript SDK) gets a session
// too (scripts/inspector-check.sh). The discovery probe's own session is
// closed by the SDK at once and never gets an owner.
//
// # Cancellation
//
// A call runs with the request's context, so a notifications/cancelled from
// the client cancels it (the bash tool then interrupts its command and keeps
// the shell, and says so in the owner's next result). The call's context is also cancelled when:
//
//   - its owner starts closing (the session ended, or the front is closing);
//   - over HTTP, the POST that carried the call goes away before it was
//     answered (the client disconnected mid-call). The SDK does not tie a
//     stateful session's calls to their HTTP request, so the handler tags
//     every POST with a private header (see requestHeader) that the tool
//     handler reads back from RequestExtra to find the request's context.
//   - over stdio, the client goes away mid-call: its input breaks, or it
//     ends and the client's end of the output has closed too.
//
// A stdio client that merely closes its input (printf ... | dsh serve, or
// the shutdown the MCP specification describes: close stdin, wait, then
// SIGTERM) gets the answers to every request it sent before, and only then
// does the session end. Until the answer to initialize is written, calls
// wait behind it, so no answer comes before it.
//
// # Progress
//
// A call whose request carries a progress token reports
// notifications/progress every Options.ProgressInterval while it runs, and
// over HTTP once at once too (that puts the response's headers on the
// wire). No report is written once the call has been answered or
// cancelled. Over stdio the response to a call that reported waits, at most
// two seconds, until the client has read everything written before it
// (FIONREAD on a pipe, SIOCOUTQ on a socket): Claude Code's client (the
// MCP TypeScript SDK) handles a notification a microtask after the message
// it was read with, so a report read in one chunk with its call's response
// would come after the response and be logged as a connection error
// ("a progress notification for an unknown token"). Its HTTP transport
// hands each event over on its own, so HTTP needs no such wait.
//
// # The fast path
//
// Over stdio, the transport answers a plain tools/call itself
// (fastcall.go): it runs the call through the same handler and writes the
// line the SDK would write, byte for byte, which TestFastCallMatchesSDK
// checks under both protocols. The SDK's dispatch of a request cost more
// CPU and latency than the rest of a trivial call. Every other request,
// and any tools/call the SDK might answer differently, goes to the SDK.
// Over streamable HTTP the handler does the same for a plain tools/call
// POST on a session (fasthttp.go; TestFastHTTPMatchesSDK): it writes the
// event stream the SDK would, carries the call's progress on it, and
// cancels it on the client's notifications/cancelled. What the fast path
// reproduces of the SDK (its decoding of a call, its protocol constant,
// the answer's bytes) is package mcpfast, which pins the go-sdk version it
// was checked against. The front decides at New whether there is a fast
// path (Options.NoFastPath: dsh serve --mcp-fast-path=false), and Serve
// installs it on a stdio connection only then.
//
// # Results and errors
//
// A tool's result is one text content block holding the tool's text. A
// tool failure (bad arguments, an empty command, cancellation, a panic) is a
// result with isError set and the message as its text: the model reads it
// and can correct itself. Only protocol faults are JSON-RPC errors: an
// unknown tool (from the SDK, -32602), or a call that arrives while its
// session or the front is shutting down (-32603).
//
// # Shutdown
//
// Close marks the front closing (new calls are refused), closes every owner
// (cancelling their calls and closing their shells), then closes every MCP
// session, and waits for the watchers. The host itself is closed by whoever
// loaded it, after the front.
package mcpfront
