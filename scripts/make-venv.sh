#!/usr/bin/env bash
# Create the project's virtualenv with a Python >= 3.11, or say exactly what is missing.
# Usage: bash scripts/make-venv.sh PYTHON VENV_DIR
set -euo pipefail
python=${1:-python3}
venv=${2:-.venv}

if ! command -v "$python" >/dev/null 2>&1; then
    echo "error: $python not found; install Python 3.11 or newer (Debian: apt-get install python3)" >&2
    exit 1
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "error: replcheck needs Python >= 3.11, $python is $("$python" --version 2>&1);" \
        "run make with PYTHON=/path/to/python3.11" >&2
    exit 1
fi
if [[ ! -x $venv/bin/python ]]; then
    if ! "$python" -m venv "$venv"; then
        echo "error: $python cannot create virtualenvs (Debian: apt-get install python3-venv)" >&2
        exit 1
    fi
fi
