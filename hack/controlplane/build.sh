#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd (and, for the local
# cluster of internal/testing/cluster, kubelet and kube-scheduler; for make
# demo, kubectl, about 25 s on a warm build cache) from Go
# modules into $1 (default ../../bin), skipping each binary that already
# reports the pinned version. Further arguments name the binaries to build
# (default: all five). Measured on 2 cores with an empty Go build cache
# (module cache warm), all five in this order: etcd 42 s, kube-apiserver
# 302 s, kube-controller-manager 109 s, kube-scheduler 12 s, kubelet 30 s
# (8.3 min, load 2-5); kubelet alone first took 985 s at load 7-20. Times
# grow with the machine's load; progress goes to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
kver=v1.37.1
ever=3.7.0
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kver -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"

say() { printf 'controlplane: %s\n' "$*" >&2; }

build() { # name want-version-substring version-cmd...
	local name=$1 want=$2; shift 2
	if [ -x "$out/$name" ] && "$out/$name" "$@" 2>/dev/null | grep -q -- "$want"; then
		say "$name $want already built in $out"
		return
	fi
	say "building $name $want (cold: several minutes on 2 cores; later runs reuse bin/)"
	local start=$SECONDS
	(cd "$here" && go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp" "./$name")
	mv "$out/$name.tmp" "$out/$name"
	say "built $name in $((SECONDS - start))s"
}

shift || true
names=("$@")
((${#names[@]})) || names=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
for name in "${names[@]}"; do
	case $name in
	etcd) build etcd "$ever" --version ;;
	kube-apiserver | kube-controller-manager | kube-scheduler | kubelet | kube-proxy) build "$name" "$kver" --version ;;
	kubectl) build kubectl "$kver" version --client ;;
	*) say "unknown binary $name (want etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy or kubectl)"; exit 2 ;;
	esac
done
