#!/usr/bin/env bash
# Prints one `replace k8s.io/X => k8s.io/X vV` line per staging module that
# k8s.io/kubernetes@$1 replaces with ./staging/src/k8s.io/X (its module zip
# does not hold the staging tree). Usage: gen-replaces.sh v1.37.1
set -euo pipefail
kver=$1
sver=v0.${kver#v1.}
mod=$(cd / && go mod download -json "k8s.io/kubernetes@$kver" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
grep -E '=> \./staging/src/' "$mod" | awk -v v="$sver" '{print "replace " $1 " => " $1 " " v}'
