#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller (the anchor of
# BenchmarkFlux, internal/bench/flux_test.go; `make flux`) from the Go
# module proxy into $1/flux (default ../../bin/flux), with each module's
# CRDs (config/crd/bases) in $1/flux/crds. The newest tags that build with
# Go 1.26 and GOTOOLCHAIN=local (each go.mod says go 1.26.0) are pinned
# below. A binary whose version stamp ($1/flux/<name>.version) names the
# pinned version is kept. Cold builds on 2 cores: 2-4 min each when idle,
# 23-42 min under load. notification-controller v1.9.3 (its Receiver)
# builds too but is not built: the benchmark requests reconciles with the
# reconcile.fluxcd.io/requestedAt annotation the Receiver would set.
#
# The module zips lack the nested api/ module that each go.mod replaces
# with ./api: the module is copied to a writable directory, that replace
# line dropped (the require of .../api at the same tag then resolves from
# the proxy) and built with -mod=mod. Progress goes to stderr; any failure
# (module proxy unreachable, build error) exits non-zero naming the step.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../bin}/flux
mkdir -p "$out/crds"
out=$(cd "$out" && pwd)

declare -A versions=(
	[source-controller]=v1.9.1
	[kustomize-controller]=v1.9.4
)

say() { printf 'flux: %s\n' "$*" >&2; }
fail() { say "$*"; exit 1; }

build() { # name
	local name=$1 ver=${versions[$1]} mod=github.com/fluxcd/$1
	if [ -x "$out/$name" ] && [ "$(cat "$out/$name.version" 2>/dev/null)" = "$mod@$ver" ] &&
		ls "$out/crds/$name"/*.yaml >/dev/null 2>&1; then
		say "$name $ver already built in $out"
		return
	fi
	say "downloading $mod@$ver from the Go module proxy"
	local dir
	dir=$(cd "$here" && GOFLAGS=-mod=mod go mod download -json "$mod@$ver" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p') ||
		fail "go mod download $mod@$ver failed (is the module proxy $(go env GOPROXY) reachable?)"
	[ -n "$dir" ] && [ -d "$dir" ] || fail "go mod download $mod@$ver gave no module directory"
	local work
	work=$(mktemp -d)
	trap 'rm -rf "$work"' RETURN
	cp -r "$dir/." "$work/"
	chmod -R u+w "$work"
	sed -i '\#^replace github.com/fluxcd/'"$name"'/api => ./api$#d' "$work/go.mod"
	say "building $name $ver (cold: a few minutes on 2 cores; later runs reuse $out)"
	local start=$SECONDS
	(cd "$work" && go build -mod=mod -trimpath -ldflags "-s -w" -o "$out/$name.tmp" .) ||
		fail "building $name $ver failed"
	mv "$out/$name.tmp" "$out/$name"
	rm -rf "$out/crds/$name"
	mkdir -p "$out/crds/$name"
	cp "$work"/config/crd/bases/*.yaml "$out/crds/$name/"
	echo "$mod@$ver" >"$out/$name.version"
	say "built $name in $((SECONDS - start))s"
}

for name in source-controller kustomize-controller; do
	build "$name"
done
