#!/usr/bin/env bash
# Builds the wheel of a git revision (a branch or commit) into dist/<name>/ of this
# checkout, in a temporary worktree, for tools/device/wheel_ab.sh (AB_MORE, or name "old"
# for the baseline). `nox -s build` empties this checkout's dist/, so build the current
# tree first and the variants after it.
#   bash tools/build_variant.sh main old; bash tools/build_variant.sh my-branch late
set -euo pipefail
rev=$1; name=$2
root=$(git rev-parse --show-toplevel)
wt=$(mktemp -d /tmp/dg-variant-XXXXXX)
trap 'git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1 || true' EXIT
git -C "$root" worktree add -q --detach "$wt" "$rev"
(cd "$wt" && nox -s build > "$wt/build.log" 2>&1) || { tail -20 "$wt/build.log"; exit 1; }
mkdir -p "$root/dist/$name"
rm -f "$root/dist/$name"/*.whl
cp "$wt"/dist/*.whl "$root/dist/$name/"
echo "dist/$name: $(ls "$root/dist/$name") ($(git -C "$root" rev-parse --short "$rev"))"
