#!/usr/bin/env bash
# Tokens per second of llama-cpp-python builds side by side, on this machine, with the default local model
# (SmolLM2-135M Q4_1): the portable build setup.sh installs, and the candidates named. Each build goes into
# .wheels/llama-cpp-python/<key>/ (as setup.sh's does; built once, --no-cache-dir) and runs from its own folder, in a
# fresh process per repeat. Prints a Markdown table: prompt processing (pp) and generation (tg) tokens/s, medians.
#   bash benchmarks/scripts/bench-llama-build.sh                       portable and native-without-AMX
#   bash benchmarks/scripts/bench-llama-build.sh portable native avx512 --repeats 5 --threads 2
# Candidates: portable (x86-64-v3, what setup.sh builds), native (-march=native with AMX off: what llama.cpp builds
# by default, less what crashes), native-amx (-march=native as is; only where the CPU has AMX), avx512 (x86-64-v3 plus
# AVX-512 F/BW/VL/VNNI/VBMI/BF16), dl (GGML_BACKEND_DL with every CPU variant: llama.cpp's runtime dispatch).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh
candidates=() repeats=3 threads=${DECLRAG_LOCAL_THREADS:-$(nproc)}
while [ $# -gt 0 ]; do
  case "$1" in
    --repeats) repeats=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    portable|native|native-amx|avx512|dl) candidates+=("$1"); shift ;;
    *) echo "bench-llama-build.sh: unknown argument '$1' (candidates: portable native native-amx avx512 dl;" \
            "options: --repeats N --threads N)" >&2; exit 2 ;;
  esac
done
[ ${#candidates[@]} -gt 0 ] || candidates=(portable native)
. scripts/llama-flags.sh
portable_args=$LLAMA_CMAKE_ARGS
no_amx="-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
model=$(.venv/bin/python -c 'from declrag.runtime.gguf import resolve_local; print(resolve_local("smollm2"))')
echo "| build | CMake flags | pp tokens/s | tg tokens/s | vs portable (tg) |"
echo "|---|---|---|---|---|"
base=""
for c in "${candidates[@]}"; do
  case "$c" in
    portable) args=$portable_args ;;
    native) args="-DGGML_NATIVE=ON $no_amx" ;;
    native-amx) args="-DGGML_NATIVE=ON" ;;
    avx512) args="${portable_args//-DGGML_AVX512=OFF/-DGGML_AVX512=ON} -DGGML_AVX512_VNNI=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_BF16=ON"
            args="${args//-DGGML_AVX512_VBMI=OFF/}"; args="${args//-DGGML_AVX512_VNNI=OFF/}"; args="${args//-DGGML_AVX512_BF16=OFF/}" ;;
    dl) args="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON" ;;
  esac
  key="$LLAMA_VERSION-bench-$c-$(printf '%s' "$args" | sha256sum | cut -c1-12)"
  [ "$c" = portable ] && key=$LLAMA_KEY
  dir=".wheels/llama-cpp-python/$key"
  if ! ls "$dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "building $c ($args): several minutes" >&2
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    CMAKE_ARGS="$args" .venv/bin/python -m pip wheel -q --no-cache-dir --no-deps --no-binary llama-cpp-python \
      -c requirements.lock llama-cpp-python -w "$dir.tmp" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  [ -d "$dir/site" ] || .venv/bin/python -m pip install -q --no-deps --target "$dir/site" "$dir"/llama_cpp_python-*.whl >&2
  line=$(PYTHONPATH="$dir/site" .venv/bin/python benchmarks/scripts/llama_speed.py "$model" "$threads" "$repeats") || {
    echo "| $c | \`$args\` | failed (exit $?) | | |"; continue; }
  read -r pp tg <<<"$line"
  [ -n "$base" ] || base=$tg
  echo "| $c | \`$args\` | $pp | $tg | $(python3 -c "print(f'{$tg / $base:.2f}x')") |"
done
