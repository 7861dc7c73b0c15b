#!/usr/bin/env bash
# Download the Python 3.12 x86-64 wheels that benchmarks/gpu/run.sh installs on a lent GPU machine
# (it has Python 3.12 and its own CUDA torch, and no network): the packages wheels.txt lists, at
# the versions constraints.txt pins, into .whl/ (ignored by git; carried to the machine with
# `carry: [".whl"]`). Run from anywhere, on a machine that reaches PyPI:
#
#   benchmarks/gpu/fetch_wheels.sh           # into .whl/ at the repository root
#   benchmarks/gpu/fetch_wheels.sh DIR       # into DIR
#
# A package published only as a source archive (grad-cam) is built into its pure-Python wheel.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:-$root/.whl}
python=${PYTHON:-python3}
platforms=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64
  manylinux1_x86_64)
mkdir -p "$dest"
rm -f "$dest"/*.whl # one version of each: two would stop the install on the machine
for requirement in $("$python" "$root/benchmarks/gpu/pins.py"); do
  if ! "$python" -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]/#/--platform=}" -d "$dest" "$requirement" 2>/dev/null; then
    "$python" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$dest" "$requirement"
  fi
done
for wheel in "$dest"/*.whl; do
  case $(basename "$wheel") in
  *-none-any.whl | *-cp312-*manylinux*x86_64*.whl | *-abi3-*manylinux*x86_64*.whl) ;;
  *) echo "not a Python 3.12 x86-64 wheel: $wheel" >&2 && exit 1 ;;
  esac
done
ls "$dest"/*.whl | wc -l | xargs echo "wheels:"
du -ch "$dest"/*.whl | tail -1
