#!/usr/bin/env bash
# ratio.sh: the per-call cost of `dsh serve` as ratios to the floors,
# measured side by side: ../shared/tools/mcpbench (an MCP client timing
# bash {"command":"true"}; -floor is a no-op tool on the same SDK,
# -rawfloor a no-op tool answered by hand, without any SDK) and
# ../shared/tools/ptylimit (a bare bash on a PTY). Rounds alternate the
# four so machine noise hits all alike; medians are reported.
#
#   scripts/ratio.sh [ROUNDS] [CALLS]       (defaults 5 and 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5} calls=${2:-2000}
tools=${DSH_SHARED_TOOLS:-../shared/tools}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/dsh" ./cmd/dsh
(cd "$tools/mcpbench" && go build -o "$work/mcpbench" .)
(cd "$tools/ptylimit" && go build -o "$work/ptylimit" .)
for ((i = 0; i < rounds; i++)); do
  "$work/mcpbench" -n "$calls" -rawfloor >>"$work/rawfloor.jsonl"
  "$work/mcpbench" -n "$calls" -floor >>"$work/floor.jsonl"
  "$work/mcpbench" -n "$calls" -- "$work/dsh" serve >>"$work/dsh.jsonl" 2>/dev/null
  "$work/ptylimit" >>"$work/pty.jsonl"
done
python3 - "$work" <<'PY'
import json, statistics, sys
w = sys.argv[1]
def load(name): return [json.loads(l) for l in open(f"{w}/{name}.jsonl")]
floor, raw, dsh, pty = load("floor"), load("rawfloor"), load("dsh"), load("pty")
med = lambda rows, k: statistics.median(r[k] for r in rows)
f_wall, f_cpu = med(floor, "p50_ms"), med(floor, "server_cpu_ms_call")
r_wall, r_cpu = med(raw, "p50_ms"), med(raw, "server_cpu_ms_call")
p_wall, p_cpu = med(pty, "true_p50_ms"), med(pty, "bash_cpu_ms_call")
d_wall = med(dsh, "p50_ms")
d_srv, d_kid = med(dsh, "server_cpu_ms_call"), med(dsh, "children_cpu_ms_call")
print(f"wall p50: dsh {d_wall:.3f} ms, floors {f_wall:.3f} + {p_wall:.3f} ms -> ratio {d_wall/(f_wall+p_wall):.2f} (target 1.2)")
print(f"CPU/call: dsh {d_srv:.3f} + bash {d_kid:.3f} ms, floors {f_cpu:.3f} + {p_cpu:.3f} ms -> ratio {(d_srv+d_kid)/(f_cpu+p_cpu):.2f} (target 1.3)")
print(f"against the no-SDK floor: wall p50 dsh {d_wall:.3f} ms, floors {r_wall:.3f} + {p_wall:.3f} ms -> ratio {d_wall/(r_wall+p_wall):.2f} (target 1.1); server CPU/call dsh {d_srv:.3f} ms, floor {r_cpu:.3f} ms -> {d_srv-r_cpu:+.3f} ms (target +0.05)")
PY
