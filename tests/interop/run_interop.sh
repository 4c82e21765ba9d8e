#!/usr/bin/env bash
# One case of interop.py under the interop venv's python; exit 77 (skipped) without the venv.
set -uo pipefail
bin="$1" driver="$2" case="$3"
venv="${SINGULARITY_INTEROP_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/singularity/interop-venv}"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "skipped: no interop venv at $venv (scripts/setup makes it; or set SINGULARITY_INTEROP_VENV)"
  exit 77
fi
exec "$venv/bin/python" "$driver" "$bin" "$case"
