#!/usr/bin/env bash
# Set up a fresh Debian 12 machine for iez: system packages, the project venv, the C build.
# Idempotent: each step is skipped when already done. Used by `make demo` and `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake pkg-config   # libiez, iez-sim
  libzmq3-dev                        # emulated MDS client in libiez
  libsimgrid-dev                     # the performance simulator (iez-sim)
  nlohmann-json3-dev                 # iez-sim reads descriptions and writes results with nlohmann-json
  mpich libmpich-dev                 # MPI-IO interception and MPI tests
  libhdf5-dev libhdf5-mpich-dev hdf5-tools  # HDF5 interception (serial and parallel)
  fio attr                           # real programs under LD_PRELOAD; getfattr for debugging
  rsync sqlite3                      # real programs whose files the plan must place (tests/test_real_programs.py)
  sysstat                            # iostat, sampled by the profiler (LIOPProf)
  wrk                                # the plan-fetch load generator of bench/bench_controlplane.py
  postgresql                         # the interaction database on PostgreSQL (tests start their own server)
  python3-venv
  chromium                           # headless browser the audit report's screenshot test drives (playwright)
  systemd lmod                       # tests/test_install.py: systemd-analyze verify of the units, Lmod loads the module
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)"
  $PY -m venv .venv
fi
stamp=.venv/.iez-deps-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python dependencies into .venv"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[control,test]'
  rm -f .venv/.iez-deps-*; touch "$stamp"
fi

echo "setup: building C components (libiez, tools) in build/"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "setup: done"
