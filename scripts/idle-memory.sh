#!/usr/bin/env bash
# idle-memory.sh: what an idle live shell costs in memory, as PSS (a
# process's private pages plus its share of the shared ones): dsh's part
# and bash's. Starts `dsh serve --http` on a free loopback port, opens one
# session and makes one call (dsh's one-time costs go in the base), then
# opens N more sessions, one call each (each starts a shell), and divides
# the growth of dsh's PSS, and the PSS of the new shells, by N.
#
# With "warm", the same for shells waiting in the warm pool (warmShells):
# dsh is started twice, with a pool of N and without one, each with one
# session and one call, and the differences are divided by N.
#
#   scripts/idle-memory.sh [N]            (default 50; dsh built from here)
#   scripts/idle-memory.sh N warm
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-50}
mode=${2:-live}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/dsh" ./cmd/dsh
python3 - "$n" "$work" "$mode" <<'PY'
import glob, json, os, secrets, socket, subprocess, sys, time, urllib.error, urllib.request
n, work, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
token = secrets.token_urlsafe(32)
with open(f"{work}/tokens", "w") as f:
    f.write(token + "\n")
os.chmod(f"{work}/tokens", 0o600)
os.mkdir(f"{work}/wd")
url = None

def serve(warm):
    global url
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    env = dict(os.environ, DSH_WARM_SHELLS=str(warm)) if warm else {k: v for k, v in os.environ.items() if k != "DSH_WARM_SHELLS"}
    url = f"http://127.0.0.1:{port}/mcp"
    return subprocess.Popen([f"{work}/dsh", "serve", "--http", f"127.0.0.1:{port}", "--token-file", f"{work}/tokens", "-w", f"{work}/wd"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)

def post(body, session=None):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": "Bearer " + token}
    if session:
        h["Mcp-Session-Id"], h["Mcp-Protocol-Version"] = session, "2025-11-25"
    with urllib.request.urlopen(urllib.request.Request(url, data=json.dumps(body).encode(), headers=h)) as r:
        r.read()
        return r.headers.get("Mcp-Session-Id")

def session_with_shell():
    sid = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "idle-memory", "version": "0"}}})
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "bash", "arguments": {"command": "true"}}}, sid)

def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0

def descendants(pid):
    out = []
    for t in glob.glob(f"/proc/{pid}/task/*/children"):
        for c in open(t).read().split():
            out += [int(c)] + descendants(int(c))
    return out

def first_session():
    for _ in range(200):
        try:
            session_with_shell()
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.05)

def measure(srv, shells):
    # Until the shells are all there (a pool fills in the background), and
    # a second more for their pages to settle.
    for _ in range(1200):
        if len(descendants(srv.pid)) >= shells:
            break
        time.sleep(0.05)
    time.sleep(1)
    return pss_kib(srv.pid), sum(map(pss_kib, descendants(srv.pid)))

if mode == "warm":
    base = {}
    for warm in (0, n):
        srv = serve(warm)
        try:
            first_session()
            base[warm] = measure(srv, 1 + warm)
        finally:
            srv.terminate()
            srv.wait()
    (dsh0, bash0), (dsh1, bash1) = base[0], base[n]
    print(f"{n} warm shells waiting: dsh {(dsh1 - dsh0) / n:.0f} KiB and bash {(bash1 - bash0) / n:.0f} KiB of PSS per shell")
    sys.exit(0)

srv = serve(0)
try:
    first_session()
    dsh0, bash0 = measure(srv, 1)
    for _ in range(n):
        session_with_shell()
    dsh1, bash1 = measure(srv, 1 + n)
    print(f"{n} idle shells: dsh {(dsh1 - dsh0) / n:.0f} KiB and bash {(bash1 - bash0) / n:.0f} KiB of PSS per shell")
finally:
    srv.terminate()
    srv.wait()
PY
