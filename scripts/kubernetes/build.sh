#!/usr/bin/env bash
# Builds the pinned Kubernetes binaries (kube-apiserver, kubelet,
# kube-controller-manager) and etcd from the Go module proxy, into a cache
# directory keyed by version: a warm run finds them there and takes no time.
#
#   scripts/kubernetes/build.sh            # prints the directory holding the binaries
#
# DSH_CACHE_DIR (default ~/.cache/dsh-ci) is the cache; .ci/run keeps it
# between runs. A cold build takes several minutes per binary on two cores.
# Nothing is downloaded but Go modules: the wrapper modules below pin
# k8s.io/kubernetes and go.etcd.io/etcd/server/v3, and map Kubernetes'
# staging modules (v0.0.0 in its go.mod) to their released versions.
set -euo pipefail

kube_version=1.37.2
etcd_version=3.7.3
cache=${DSH_CACHE_DIR:-$HOME/.cache/dsh-ci}
out=$cache/kubernetes/v$kube_version-etcd$etcd_version
binaries=(kube-apiserver kubelet kube-controller-manager etcd)

have_all() {
  local b
  for b in "${binaries[@]}"; do [ -x "$out/$b" ] || return 1; done
}
if have_all; then
  echo "$out"
  exit 0
fi

mkdir -p "$out"
# One build at a time per cache, even when two runs start together.
exec 9>"$out.lock"
flock 9
if have_all; then
  echo "$out"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/dsh-kube-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

if [ ! -x "$out/etcd" ]; then
  echo "building etcd v$etcd_version" >&2
  mkdir -p "$work/etcd"
  cat >"$work/etcd/main.go" <<'GO'
// Command etcd is etcd's server, built from its module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (
    cd "$work/etcd"
    go mod init dsh.local/etcd >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@v$etcd_version" >&2
    go mod tidy >&2
    go build -trimpath -ldflags '-s -w' -o "$out/etcd.tmp" .
  )
  mv "$out/etcd.tmp" "$out/etcd"
fi

if [ ! -x "$out/kube-apiserver" ] || [ ! -x "$out/kubelet" ] || [ ! -x "$out/kube-controller-manager" ]; then
  echo "building kube-apiserver, kubelet, kube-controller-manager v$kube_version" >&2
  mkdir -p "$work/kube"
  cd "$work/kube"
  go mod init dsh.local/kube >/dev/null 2>&1
  go mod download -json "k8s.io/kubernetes@v$kube_version" >"$work/kube.json"
  gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' "$work/kube.json")
  # Every k8s.io module that k8s.io/kubernetes requires at v0.0.0 lives in
  # its staging tree; the released copy has the matching v0 minor.
  staging=$(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$gomod" | sort -u)
  {
    echo "require k8s.io/kubernetes v$kube_version"
    for m in $staging; do echo "replace $m => $m v0.${kube_version#1.}"; done
  } >>go.mod
  cmds=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager)
  go get "${cmds[@]/%/@v$kube_version}" >&2
  version_pkg=k8s.io/component-base/version
  ldflags="-s -w"
  for pkg in "$version_pkg" k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v$kube_version -X $pkg.gitMajor=1"
    ldflags+=" -X $pkg.gitMinor=$(echo "$kube_version" | cut -d. -f2)"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  mkdir -p bin
  go build -trimpath -ldflags "$ldflags" -o bin/ "${cmds[@]}" >&2
  for b in kube-apiserver kubelet kube-controller-manager; do
    mv "bin/$b" "$out/$b"
  done
fi

have_all
echo "$out"
