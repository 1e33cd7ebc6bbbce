#!/usr/bin/env bash
# Install Azurite (Microsoft's Azure Storage emulator, from the npm registry) into the
# project's own .tools folder, for the Azure lake tests (tests/object_store/azurite_server.py).
#
# Project-local, never global: the tests run <repo>/.tools/node_modules/.bin/azurite-blob.
# Idempotent: when that program is there it only reports. Needs Node 18+ and npm.
#
# Usage: bash scripts/install-azurite.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
tools="$repo/.tools"
program="$tools/node_modules/.bin/azurite-blob"
# 3.37.0 or newer: the first to honour List Blobs' startFrom, with which delta-rs lists a
# Delta log from a version on (older ones list from version 0, and a table's third commit
# fails). Pinned, so every machine tests against the same emulator.
version="3.37.0"
installed="$tools/node_modules/azurite/package.json"

if [[ -x $program ]] && grep -q "\"version\": \"$version\"" "$installed" 2>/dev/null; then
    echo "found: Azurite $version ($program)"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "missing: npm (Node.js 18+), needed to install Azurite for the Azure lake tests" >&2
    exit 1
fi
echo "installing: azurite@$version into $tools"
mkdir -p "$tools"
npm install --prefix "$tools" --no-audit --no-fund --loglevel=error "azurite@$version"
[[ -x $program ]] || { echo "npm did not install $program" >&2; exit 1; }
echo "found: Azurite $version ($program)"
