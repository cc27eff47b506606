#!/usr/bin/env bash
# Builds the upstream KubeVirt virtctl (kubevirt.io/kubevirt/cmd/virtctl) of
# release $ver from Go modules into $1 (default ../../bin), unless a virtctl
# there already reports that version (`virtctl version --client`).
#
# Why not `go install kubevirt.io/kubevirt/cmd/virtctl@$ver`: the go.mod of
# kubevirt.io/kubevirt replaces kubevirt.io/api and kubevirt.io/client-go with
# ./staging/src/kubevirt.io/{api,client-go}, which are separate modules and so
# are not in the kubevirt.io/kubevirt module zip, and `go install pkg@version`
# refuses any module with replace directives anyway.
#
# Recipe: take the kubevirt.io/kubevirt@$ver source from the module cache
# (`go mod download`), copy it to a temporary directory, drop its go.work
# (GOWORK=off) and the two ./staging replaces, require the published
# kubevirt.io/api@$ver and kubevirt.io/client-go@$ver instead (tagged from the
# same commit as the staging copies), keep every other replace (k8s.io/* at
# the versions this release pins, openshift, ...) and build ./cmd/virtctl
# there with GOFLAGS=-mod=mod, which only fills in the copy's go.sum. Nothing
# of the converge module (its go.mod, go.sum) is read or changed. The version
# variables of kubevirt.io/client-go/version are set as upstream's
# hack/version.sh does, from the release's module info (tag, commit, time),
# so the binary is the same on every run.
#
# Why v1.8.2 and not v1.9.0 (the release of the kubevirt.io/api and
# client-go that converge uses): kubevirt.io/kubevirt@v1.9.0 needs
# kubevirt.io/virt-template-{api,client-go,engine}@v0.2.0, which the module
# proxy reachable here refuses ("403 Forbidden ... This module version is not
# available"; so does kubevirt.io/kubevirt@v1.9.1). v1.8.2, the newest
# release tried that builds here (v1.8.3 was not tried), needs virt-template
# v0.1.7, which the proxy serves. To move to v1.9.x, change ver once the
# proxy serves those modules.
#
# Measured on 2 shared cores (module cache mostly warm, build cache cold):
# 891 s wall at load 2.5-16, 6 min user CPU; see README.md next to this file.
# Progress goes to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
ver=v1.8.2

say() { printf 'virtctl: %s\n' "$*" >&2; }

if [ -x "$out/virtctl" ] && "$out/virtctl" version --client 2>/dev/null | grep -q "GitVersion:\"$ver\""; then
	say "virtctl $ver already built in $out"
	exit 0
fi

export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false"
say "building virtctl $ver (cold: 5-15 min on 2 cores; later runs reuse $out)"
start=$SECONDS

go mod download kubevirt.io/kubevirt@"$ver" kubevirt.io/api@"$ver" kubevirt.io/client-go@"$ver"
modcache=$(go env GOMODCACHE)
src=$modcache/kubevirt.io/kubevirt@$ver
info=$modcache/cache/download/kubevirt.io/kubevirt/@v/$ver.info
commit=$(sed -n 's/.*"Hash":"\([0-9a-f]*\)".*/\1/p' "$info")
date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info")

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/kubevirt"
chmod -R u+w "$tmp/kubevirt"
cd "$tmp/kubevirt"
rm -f go.work go.work.sum
go mod edit \
	-dropreplace=kubevirt.io/api -dropreplace=kubevirt.io/client-go \
	-require=kubevirt.io/api@"$ver" -require=kubevirt.io/client-go@"$ver"

vpkg=kubevirt.io/client-go/version
ldflags="-s -w -X $vpkg.gitVersion=$ver -X $vpkg.gitCommit=$commit -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=$date"
go build -trimpath -ldflags "$ldflags" -o "$out/virtctl.tmp" ./cmd/virtctl
mv "$out/virtctl.tmp" "$out/virtctl"
say "built virtctl $ver in $((SECONDS - start))s"
