#!/usr/bin/env bash
# Install the object-store emulators the lake tests start, from the npm registry, into the
# project's own .tools folder: Azurite (the Azure Storage emulator,
# tests/object_store/azurite_server.py) and s3rver (a second S3 implementation beside moto,
# tests/object_store/s3rver_server.py).
#
# Project-local, never global: the tests run <repo>/.tools/node_modules/.bin/<program>.
# Idempotent: a tool already there at its pinned version is only reported. Needs Node 18+
# and npm.
#
# Usage: bash scripts/install-npm-tools.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
tools="$repo/.tools"
# "package version program", pinned so every machine tests against the same emulators.
# Azurite 3.37.0 or newer: the first to honour List Blobs' startFrom, with which delta-rs
# lists a Delta log from a version on (older ones list from version 0, and a table's third
# commit fails).
wanted=("azurite 3.37.0 azurite-blob" "s3rver 3.7.1 s3rver")

missing=()
for tool in "${wanted[@]}"; do
    read -r name version program <<<"$tool"
    installed="$tools/node_modules/$name/package.json"
    if [[ -x $tools/node_modules/.bin/$program ]] && grep -q "\"version\": \"$version\"" "$installed" 2>/dev/null; then
        echo "found: $name $version ($tools/node_modules/.bin/$program)"
    else
        missing+=("$name@$version")
    fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if ! command -v npm >/dev/null 2>&1; then
    echo "missing: npm (Node.js 18+), needed to install ${missing[*]} for the lake tests" >&2
    exit 1
fi
echo "installing: ${missing[*]} into $tools"
mkdir -p "$tools"
npm install --prefix "$tools" --no-audit --no-fund --loglevel=error "${missing[@]}"
for tool in "${wanted[@]}"; do
    read -r name version program <<<"$tool"
    [[ -x $tools/node_modules/.bin/$program ]] || { echo "npm did not install $program" >&2; exit 1; }
    echo "found: $name $version ($tools/node_modules/.bin/$program)"
done
