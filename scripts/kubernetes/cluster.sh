#!/usr/bin/env bash
# A single-node Kubernetes cluster on loopback, for the kubernetes backend's
# tests: etcd, kube-apiserver, kube-controller-manager (garbage collector,
# namespaces and persistent volume binding only), kubelet and a containerd of its own, all under one
# directory, with its own sockets, ports, CNI bridge and cgroup root.
#
#   scripts/kubernetes/cluster.sh up DIR     # start; prints the env file to source
#   scripts/kubernetes/cluster.sh down DIR   # stop and remove everything it made
#
# up builds (or finds cached) the binaries with build.sh, the images with
# cmd/dsh-kube-image, and waits for the node to be Ready. DIR/env then sets
# DSH_TEST_KUBECONFIG (cluster admin), DSH_TEST_KUBE_BACKEND_KUBECONFIG (a
# user with no rights until a RoleBinding gives it some) and the images.
# down leaves no process, mount, network namespace, bridge or cgroup of the
# cluster behind, and removes DIR; it is safe to run on a half-started one.
#
# Needs root, containerd and runc, the CNI plugins (containernetworking-
# plugins), openssl, iproute2, curl and python3. Nothing here touches
# another containerd or Docker: only processes in this cluster's cgroup are
# killed, only its network namespaces and bridge removed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

usage() {
  echo "usage: $0 up|down DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
dir=$2
case "$dir" in /*) ;; *) dir=$(pwd)/$dir ;; esac

log() { printf '%s kube: %s\n' "$(date +%T)" "$*" >&2; }

# The v1 hierarchies the kubelet uses; the cluster's cgroup is made in each.
controllers=(cpu cpuacct cpuset memory pids hugetlb blkio devices freezer systemd)

cgroup_dirs() {
  local c
  for c in "${controllers[@]}" unified; do
    [ -d "/sys/fs/cgroup/$c" ] && echo "/sys/fs/cgroup/$c/$(cat "$dir/cgroup")"
  done
  return 0
}

# pids_in_cgroup lists every process in the cluster's cgroup tree.
pids_in_cgroup() {
  local root
  root=/sys/fs/cgroup/pids/$(cat "$dir/cgroup")
  [ -d "$root" ] || return 0
  find "$root" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start NAME CMD...: runs CMD in the cluster's cgroup, in a session of its
# own, logging to DIR/logs/NAME.log.
start() {
  local name=$1
  shift
  local procs=/sys/fs/cgroup/pids/$(cat "$dir/cgroup")/system/cgroup.procs
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' start "$procs" "$@" \
    </dev/null >"$dir/logs/$name.log" 2>&1 &
  echo $! >"$dir/pids/$name"
}

# wait_for DESCRIPTION SECONDS CMD...: polls CMD every 100 ms.
wait_for() {
  local what=$1 secs=$2
  shift 2
  local i
  for ((i = 0; i < secs * 10; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  log "timed out waiting for $what"
  return 1
}

kubeconfig() { # NAME USER
  cat >"$dir/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: dsh
  cluster:
    server: https://127.0.0.1:$(cat "$dir/ports/apiserver")
    certificate-authority: $dir/pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $dir/pki/$2.crt
    client-key: $dir/pki/$2.key
contexts:
- name: dsh
  context: {cluster: dsh, user: $2}
current-context: dsh
EOF
}

# cert NAME CN [O] [SANS]: a key and a certificate signed by the CA.
cert() {
  local name=$1 cn=$2 org=${3:-} sans=${4:-}
  local subj="/CN=$cn"
  [ -n "$org" ] && subj="/O=$org$subj"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/pki/$name.key" -subj "$subj" -out "$dir/pki/$name.csr" 2>/dev/null
  local ext="$dir/pki/$name.ext"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [ -n "$sans" ] && echo "subjectAltName=$sans"
  } >"$ext"
  openssl x509 -req -in "$dir/pki/$name.csr" -CA "$dir/pki/ca.crt" -CAkey "$dir/pki/ca.key" \
    -CAcreateserial -days 2 -extfile "$ext" -out "$dir/pki/$name.crt" 2>/dev/null
}

api() { # METHOD PATH [BODY]: the API as cluster admin
  local args=(-sS --fail-with-body --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" -X "$1")
  [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' --data "$3")
  curl "${args[@]}" "https://127.0.0.1:$(cat "$dir/ports/apiserver")$2"
}

node_ready() {
  api GET /api/v1/nodes/localhost | python3 -c '
import json, sys
node = json.load(sys.stdin)
ready = [c for c in node["status"].get("conditions", []) if c["type"] == "Ready"]
sys.exit(0 if ready and ready[0]["status"] == "True" else 1)'
}

up() {
  if [ -e "$dir/cgroup" ]; then
    echo "$dir holds a cluster already; run down first" >&2
    exit 1
  fi
  local t0=$SECONDS
  mkdir -p "$dir"/{pki,logs,pids,ports,etcd,kubelet,pod-logs,containerd/root,containerd/state,cni/net.d,cni/ipam,images}
  local id
  id=$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "dsh-kube-$id" >"$dir/cgroup"
  echo "dshk$id" >"$dir/bridge"

  local bin
  bin=$("$here/build.sh")
  log "binaries in $bin ($((SECONDS - t0)) s)"

  # The cgroup: system/ holds the daemons (and so the container shims),
  # pods/ is the kubelet's cgroupRoot.
  local cg parent sub
  for cg in $(cgroup_dirs); do
    for sub in "" /system /pods; do
      mkdir -p "$cg$sub"
      if [[ $cg == /sys/fs/cgroup/cpuset/* ]]; then
        parent=$(dirname "$cg$sub")
        cat "$parent/cpuset.cpus" >"$cg$sub/cpuset.cpus"
        cat "$parent/cpuset.mems" >"$cg$sub/cpuset.mems"
      fi
    done
  done

  local p
  for p in etcd etcd-peer apiserver kubelet; do free_port >"$dir/ports/$p"; done

  # PKI: a CA, the servers' certificates and the clients'.
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/pki/ca.key" -subj "/CN=dsh-test-ca" -days 2 -out "$dir/pki/ca.crt" 2>/dev/null
  cert apiserver kube-apiserver "" "IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc"
  cert kubelet-serving localhost "" "IP:127.0.0.1,DNS:localhost"
  cert admin admin system:masters
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert kubelet system:node:localhost system:nodes
  # The controllers share the controller manager's identity (no service
  # account per controller, which needs the token controller): its own
  # role lets it read, not delete a namespace's pods (the namespace
  # controller), delete dependents (the garbage collector) or bind volumes
  # (the persistent volume binder), so it is a cluster admin here.
  cert controller-manager system:kube-controller-manager system:masters
  cert dsh-backend dsh-backend
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$dir/pki/sa.key" 2>/dev/null
  openssl pkey -in "$dir/pki/sa.key" -pubout -out "$dir/pki/sa.pub" 2>/dev/null
  kubeconfig admin admin
  kubeconfig kubelet kubelet
  kubeconfig controller-manager controller-manager
  kubeconfig dsh-backend dsh-backend

  # containerd: its own root, state and sockets; the CRI with the local
  # pause image, cgroupfs, and no oom_score_adj below its own (this root
  # lacks CAP_SYS_RESOURCE).
  cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$dir/containerd.sock"
[ttrpc]
  address = "$dir/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "dsh-kube-pause:local"
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
EOF
  # CNI: one bridge of the cluster's own, no gateway, no NAT, no iptables:
  # pods get an address and reach nothing.
  cat >"$dir/cni/net.d/10-dsh.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "dsh-test",
  "plugins": [{
    "type": "bridge",
    "bridge": "$(cat "$dir/bridge")",
    "isGateway": false,
    "ipMasq": false,
    "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam", "ranges": [[{"subnet": "10.213.0.0/24"}]]}
  }]
}
EOF
  start containerd containerd --config "$dir/containerd/config.toml"
  wait_for containerd 30 ctr -a "$dir/containerd.sock" version

  # The images: a shell from this machine's bash and coreutils, the
  # helper, and the pod sandbox's pause (the helper again).
  log "images"
  (cd "$repo" && go run ./cmd/dsh-kube-image -out "$dir/images")
  local img
  for img in "$dir"/images/*.tar; do
    ctr -a "$dir/containerd.sock" -n k8s.io images import --no-unpack=false "$img" >/dev/null
  done

  start etcd "$bin/etcd" --name default --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$(cat "$dir/ports/etcd")" \
    --advertise-client-urls "http://127.0.0.1:$(cat "$dir/ports/etcd")" \
    --listen-peer-urls "http://127.0.0.1:$(cat "$dir/ports/etcd-peer")" \
    --initial-advertise-peer-urls "http://127.0.0.1:$(cat "$dir/ports/etcd-peer")" \
    --initial-cluster "default=http://127.0.0.1:$(cat "$dir/ports/etcd-peer")" \
    --unsafe-no-fsync --log-level warn

  start kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$(cat "$dir/ports/etcd")" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
    --secure-port "$(cat "$dir/ports/apiserver")" \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --client-ca-file "$dir/pki/ca.crt" \
    --kubelet-client-certificate "$dir/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$dir/pki/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$dir/pki/ca.crt" \
    --kubelet-preferred-address-types Hostname,InternalIP \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$dir/pki/sa.pub" \
    --service-account-signing-key-file "$dir/pki/sa.key" \
    --service-cluster-ip-range 10.214.0.0/24 \
    --endpoint-reconciler-type none \
    --authorization-mode Node,RBAC \
    --disable-admission-plugins ServiceAccount \
    --profiling=false
  wait_for kube-apiserver 120 api GET /readyz

  start kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$dir/controller-manager.kubeconfig" \
    --controllers garbagecollector,namespace,persistentvolume-binder \
    --leader-elect=false --secure-port 0 --use-service-account-credentials=false

  cat >"$dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $(cat "$dir/ports/kubelet")
readOnlyPort: 0
healthzPort: 0
tlsCertFile: $dir/pki/kubelet-serving.crt
tlsPrivateKeyFile: $dir/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$dir/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /$(cat "$dir/cgroup")/pods
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
podLogsDir: $dir/pod-logs
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
serializeImagePulls: false
maxPods: 250
registerNode: true
EOF
  start kubelet "$bin/kubelet" --config "$dir/kubelet/config.yaml" \
    --kubeconfig "$dir/kubelet.kubeconfig" --root-dir "$dir/kubelet" \
    --hostname-override localhost --cert-dir "$dir/kubelet/pki"
  wait_for "the node to be Ready" 120 node_ready

  cat >"$dir/env" <<EOF
export DSH_TEST_KUBECONFIG=$dir/admin.kubeconfig
export DSH_TEST_KUBE_BACKEND_KUBECONFIG=$dir/dsh-backend.kubeconfig
export DSH_TEST_KUBE_BACKEND_USER=dsh-backend
export DSH_TEST_KUBE_IMAGE=dsh-shell:local
export DSH_TEST_KUBE_HELPER_IMAGE=dsh-kube-helper:local
export DSH_TEST_KUBE_NODE=localhost
export DSH_TEST_KUBE_DIR=$dir
EOF
  log "the cluster is up ($((SECONDS - t0)) s): source $dir/env"
  echo "$dir/env"
}

# stop_daemon NAME: SIGTERM, then SIGKILL after 10 s.
stop_daemon() {
  local f=$dir/pids/$1 pid i
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$f"
}

down() {
  [ -f "$dir/cgroup" ] || { rm -rf "$dir"; return 0; }
  local t0=$SECONDS
  # Pods first, through the kubelet, so that CNI DEL runs for each.
  if [ -f "$dir/ports/apiserver" ] && api GET /readyz >/dev/null 2>&1; then
    api GET /api/v1/pods | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    print(p["metadata"]["namespace"], p["metadata"]["name"])' |
      while read -r ns name; do
        api DELETE "/api/v1/namespaces/$ns/pods/$name" '{"gracePeriodSeconds":0}' >/dev/null 2>&1 || true
      done
    local i
    for ((i = 0; i < 300; i++)); do
      [ "$(ctr -a "$dir/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null | wc -l)" -eq 0 ] && break
      sleep 0.1
    done
  fi
  # The network namespaces of whatever still runs in the cluster, before
  # it is killed: they are bind-mounted under /run/netns.
  local netns=() pid ino ns
  local inos=" "
  for pid in $(pids_in_cgroup); do
    ino=$(stat -L -c %i "/proc/$pid/ns/net" 2>/dev/null) || continue
    inos+="$ino "
  done
  for ns in /run/netns/* /var/run/netns/*; do
    [ -e "$ns" ] || continue
    ino=$(stat -L -c %i "$ns" 2>/dev/null) || continue
    [[ $inos == *" $ino "* ]] && [[ $(stat -f -c %T "$ns") == nsfs ]] && netns+=("$ns")
  done
  for name in kubelet kube-controller-manager kube-apiserver etcd; do stop_daemon "$name"; done
  # The container shims' sockets (in containerd's shared /run/containerd/s):
  # a shim removes its own when it exits cleanly; these are the ones of
  # shims about to be killed.
  local socks=() args addr cid cns
  for pid in $(pids_in_cgroup); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == containerd-shim* ]] || continue
    mapfile -d '' -t args <"/proc/$pid/cmdline" || continue
    addr= cid= cns=
    for ((i = 0; i < ${#args[@]}; i++)); do
      case "${args[i]}" in
        -address) addr=${args[i + 1]} ;;
        -id) cid=${args[i + 1]} ;;
        -namespace) cns=${args[i + 1]} ;;
      esac
    done
    [ -n "$addr" ] && [ -n "$cid" ] && [ -n "$cns" ] &&
      socks+=("/run/containerd/s/$(printf '%s' "$addr/$cns/$cid" | sha256sum | cut -d' ' -f1)")
  done
  stop_daemon containerd
  # Whatever is left in the cgroup (shims, containers): killed, until none.
  for ((i = 0; i < 100; i++)); do
    local left
    left=$(pids_in_cgroup)
    [ -z "$left" ] && break
    kill -KILL $left 2>/dev/null || true
    sleep 0.1
  done
  for s in "${socks[@]}"; do rm -f "$s"; done
  for ns in "${netns[@]}"; do umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null || true; rm -f "$ns"; done
  # Mounts under the directory (rootfs overlays, shm, volumes), deepest
  # first.
  local m
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done < <(awk -v d="$dir/" 'index($5, d) == 1 { print length($5), $5 }' /proc/self/mountinfo | sort -rn | cut -d' ' -f2-)
  ip link del "$(cat "$dir/bridge")" 2>/dev/null || true
  # The cgroups, deepest first, in every hierarchy.
  local cg
  for cg in $(cgroup_dirs); do
    [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  # Nothing may be left: a cgroup (so no process), a mount under the
  # directory, a network namespace that was the pods', the bridge.
  local leftover=() bridge
  bridge=$(cat "$dir/bridge")
  for cg in $(cgroup_dirs); do [ -d "$cg" ] && leftover+=("cgroup $cg"); done
  while read -r m; do leftover+=("mount $m"); done < <(awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo)
  for ns in "${netns[@]}"; do [ -e "$ns" ] && leftover+=("netns $ns"); done
  ip link show "$bridge" >/dev/null 2>&1 && leftover+=("bridge $bridge")
  if ((${#leftover[@]})); then
    log "left behind: ${leftover[*]}"
    return 1
  fi
  rm -rf "$dir"
  log "the cluster is gone ($((SECONDS - t0)) s)"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  *) usage ;;
esac
