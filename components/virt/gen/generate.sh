#!/bin/sh
# Regenerates the CUE definitions of kubevirt.io/api core/v1 (and every Go
# package its types reference: k8s.io/api core/v1, apimachinery, CDI
# v1beta1, ...) under components/virt/gen/, with `cue get go` from the Go
# module cache (no network: kubevirt.io/api is pinned in go.mod).
#
# cue get go writes to a CUE module's cue.mod/gen; converge embeds only
# components/ and schema/ (cue.go), so the tree is generated in a scratch
# module and moved here, with the import paths of the generated packages
# prefixed by this directory's import path. Files ending in _go_gen.cue are
# generated; the hand-written overrides (*_types.cue: Quantity, Time,
# IntOrString, ...) are kept.
#
# Usage, from the repository root: components/virt/gen/generate.sh
# (needs bin/cue, the pinned cue v0.17.1).
set -eu
root=$(pwd)
cue=${CUE:-$root/bin/cue}
dest=$root/components/virt/gen
prefix=converge.dev/converge/components/virt/gen
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/cue.mod"
cp "$root/cue.mod/module.cue" "$scratch/cue.mod/"
cp "$root/go.mod" "$root/go.sum" "$scratch/"
printf 'package gen\n\nimport (\n\t_ "kubevirt.io/api/core/v1"\n\t_ "kubevirt.io/api/instancetype/v1beta1"\n\t_ "kubevirt.io/api/snapshot/v1beta1"\n)\n' >"$scratch/gen.go"
# cue get go types any Go type with an UnmarshalJSON method as `_`.
# kubevirt.io/api's VirtualMachineInstanceSpec, DHCPOptions and PodNetwork
# have one only to sanitise IP addresses, so they are generated from a
# copy of the module with those methods renamed (their JSON shape is the
# plain struct's, as upstream's CRD has it).
api=$(cd "$root" && go list -m -f '{{.Dir}}' kubevirt.io/api)
cp -r "$api" "$scratch/kubevirt-api"
chmod -R u+w "$scratch/kubevirt-api"
sed -i 's/) UnmarshalJSON(data \[\]byte) error {/) unmarshalJSONForCUE(data []byte) error {/' \
	"$scratch/kubevirt-api/core/v1/types.go" "$scratch/kubevirt-api/core/v1/schema.go"
(cd "$scratch" && go mod edit -replace kubevirt.io/api=./kubevirt-api)
(cd "$scratch" && GOFLAGS=-mod=mod "$cue" get go kubevirt.io/api/core/v1 kubevirt.io/api/instancetype/v1beta1 kubevirt.io/api/snapshot/v1beta1)
find "$dest" -name '*_go_gen.cue' -delete
cd "$scratch/cue.mod/gen"
find . -name '*_go_gen.cue' | while read -r f; do
	mkdir -p "$dest/$(dirname "$f")"
	# Rewrite only import specs of non-standard packages (a dot in the
	# first path element): inside "import ( ... )" blocks and on single
	# "import [name] \"path\"" lines.
	awk -v p="$prefix/" '
		/^import \($/ { inblock = 1; print; next }
		inblock && /^\)$/ { inblock = 0; print; next }
		(inblock || /^import /) && /"[^"\/]*\.[^"]*"/ { sub(/"/, "\"" p); print; next }
		{ print }
	' "$f" >"$dest/$f"
done
