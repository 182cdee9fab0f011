#!/usr/bin/env bash
# ppsweep's bench on a CUDA machine, in one command: checks the GPU, makes sure JAX runs on it (installing
# JAX's CUDA wheels with pip where they are missing), runs scripts/bench.py, prints its figures and exits.
#
#   scripts/gpu_bench.sh                       # on the GPU machine: the default table and --peers
#   scripts/gpu_bench.sh -- --skip-table --peers --reps 5      # other bench arguments after --
#   scripts/gpu_bench.sh --wheels DIR          # install what is missing from DIR only (a machine without network)
#   scripts/gpu_bench.sh --download DIR [PKG…] # here, with network: wheels of small missing packages into DIR
#
# Environment: PYTHON (default python3: on the lent H200 image, the one with PyTorch, JAX, numba),
# JAX_CUDA (the jax extra to install, default cuda13; cuda12 for older drivers), GPU_BENCH_TIMEOUT
# (seconds the bench may run, default 540, so the command ends inside a 10-minute device call),
# GPU_BENCH_ALLOW_CPU=1 (run on a machine without a GPU: for checking this script).
#
# The bench needs numpy, pyyaml, jax and numba (torch for the PyTorch peer of --peers; the row says
# "not run" without it). JAX's CUDA wheels (the NVIDIA libraries) are a few GiB: a machine without
# network must already hold them (the lent H200 image does: jax with jax-cuda13-plugin).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEELS=""
if [[ "${1:-}" == "--download" ]]; then
    dir=${2:?"--download DIR [PACKAGE ...]: the folder to write wheels into"}
    shift 2
    packages=("$@")
    [[ ${#packages[@]} -eq 0 ]] && packages=(pyyaml numba)
    mkdir -p "$dir"
    # manylinux x86-64 wheels for the H200 image's Python 3.12 (the machine cannot reach a registry)
    "$PY" -m pip download --only-binary=:all: --platform manylinux2014_x86_64 --python-version 3.12 -d "$dir" "${packages[@]}"
    echo "gpu_bench: wheels in $dir; on the GPU machine carry that folder and run scripts/gpu_bench.sh --wheels $dir"
    exit 0
fi
if [[ "${1:-}" == "--wheels" ]]; then
    WHEELS=${2:?"--wheels DIR: the folder of wheels to install from"}
    shift 2
fi
[[ "${1:-}" == "--" ]] && shift
BENCH_ARGS=("$@")
[[ ${#BENCH_ARGS[@]} -eq 0 ]] && BENCH_ARGS=(--peers)

pip_install() {  # from the wheel folder only where one was given, else from the index
    if [[ -n "$WHEELS" ]]; then
        "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" "$@"
    else
        "$PY" -m pip install --quiet "$@"
    fi
}

echo "gpu_bench: $(date -u +%Y-%m-%dT%H:%M:%SZ), $("$PY" --version 2>&1) at $(command -v "$PY")"
if ! nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; then
    if [[ "${GPU_BENCH_ALLOW_CPU:-0}" != "1" ]]; then
        echo "gpu_bench: no NVIDIA GPU here (nvidia-smi failed); GPU_BENCH_ALLOW_CPU=1 runs the bench on the CPU" >&2
        exit 2
    fi
    echo "gpu_bench: no GPU; running on the CPU (GPU_BENCH_ALLOW_CPU=1)"
fi

for module in numpy yaml numba; do
    if ! "$PY" -c "import $module" 2>/dev/null; then
        package=$module
        [[ $module == yaml ]] && package=pyyaml
        echo "gpu_bench: installing $package"
        pip_install "$package"
    fi
done

jax_on_gpu() { "$PY" -c "import jax, sys; sys.exit(0 if jax.devices()[0].platform == 'gpu' else 1)" 2>/dev/null; }
if [[ "${GPU_BENCH_ALLOW_CPU:-0}" != "1" ]] && ! jax_on_gpu; then
    version=$("$PY" -c "import jax; print(jax.__version__)" 2>/dev/null || true)
    spec="jax[${JAX_CUDA:-cuda13}]${version:+==$version}"
    echo "gpu_bench: JAX does not see the GPU; installing $spec"
    if ! pip_install "$spec" || ! jax_on_gpu; then
        echo "gpu_bench: JAX still does not run on the GPU after installing $spec (JAX_CUDA=cuda12 for CUDA 12 drivers)" >&2
        exit 3
    fi
fi
"$PY" -c "import jax, numba, numpy; print(f'gpu_bench: JAX {jax.__version__} on {jax.devices()}, numba {numba.__version__}, numpy {numpy.__version__}')"

echo "gpu_bench: python scripts/bench.py ${BENCH_ARGS[*]}"
status=0
PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" \
    timeout "${GPU_BENCH_TIMEOUT:-540}" "$PY" scripts/bench.py "${BENCH_ARGS[@]}" || status=$?
[[ $status -eq 124 ]] && echo "gpu_bench: the bench ran past GPU_BENCH_TIMEOUT=${GPU_BENCH_TIMEOUT:-540} s" >&2
echo "gpu_bench: exit $status"
exit $status
