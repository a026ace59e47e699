#!/usr/bin/env bash
# Copies the two header-only libraries the cudakit command is built with (CLI11 and
# nlohmann/json, installed here by scripts/ensure-deps.sh) into .deps/include, a folder
# git ignores. CMake looks there when the system has no copy of its own, so a machine
# that cannot install packages builds the command from the copied folder:
#   scripts/gather-tool-deps.sh      here, then carry .deps/ beside the sources
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.deps/include
mkdir -p "$dest"
for header in CLI/CLI.hpp nlohmann/json.hpp; do
  dir=${header%%/*}
  src=
  for root in /usr/include /usr/local/include; do
    [ -f "$root/$header" ] && { src=$root/$dir; break; }
  done
  if [ -z "$src" ]; then
    echo "gather-tool-deps: $header not found; run scripts/ensure-deps.sh first" >&2
    exit 1
  fi
  rm -rf "${dest:?}/$dir"
  cp -r "$src" "$dest/$dir"
done
echo "gather-tool-deps: $(du -sh .deps | cut -f1) in .deps/ (CLI11, nlohmann/json)"
