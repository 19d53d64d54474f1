#!/usr/bin/env bash
# Runs a Python test from the runfiles tree with Debian's python3 and the
# kiln_client package (sources + generated stubs) on PYTHONPATH.
set -euo pipefail
export PYTHONPATH="$PWD/clients/python${PYTHONPATH:+:$PYTHONPATH}"
exec /usr/bin/python3 "$@"
