# Sourced by setup.sh (and benchmarks/scripts/bench-llama-build.sh): the portable CMake flags llama-cpp-python is built with,
# per platform, and the key of the wheel folder they name. DECLRAG_LLAMA_CMAKE_ARGS replaces them.
# x86-64: the x86-64-v3 level (AVX2, FMA, F16C, BMI2: every x86-64 server and desktop CPU since 2013-2015), with
#   AVX-512, AVX-VNNI and AMX left out; -march=native is what made the AMX build die (docs/guides/local-models.md).
# ARM64 Linux: armv8-a, every 64-bit ARM core (a Raspberry Pi 4 included); macOS on Apple silicon:
#   armv8.2-a with dot product and FP16, which every M-series chip has, and Metal (llama-cpp-python's default).
os=$(uname -s); arch=$(uname -m)
case "$os/$arch" in
  Linux/x86_64|Linux/amd64|Darwin/x86_64|MINGW*/x86_64|MSYS*/x86_64)
    LLAMA_TARGET="x86-64-v3"
    LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" ;;
  Darwin/arm64)
    LLAMA_TARGET="apple-silicon"
    LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod+fp16" ;;
  Linux/aarch64|Linux/arm64)
    LLAMA_TARGET="armv8-a"
    LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8-a" ;;
  *)
    LLAMA_TARGET="$os-$arch-generic"
    LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF" ;;
esac
if [ -n "${DECLRAG_LLAMA_CMAKE_ARGS:-}" ]; then
  LLAMA_TARGET="custom"
  LLAMA_CMAKE_ARGS="$DECLRAG_LLAMA_CMAKE_ARGS"
fi
LLAMA_VERSION=$(sed -n 's/^llama-cpp-python==//p' requirements.lock)
# a build for this very CPU (-DGGML_NATIVE=ON, or no GGML_NATIVE=OFF) is keyed by the CPU's flags too, so that a
# checkout copied to another machine builds again instead of installing a wheel that may not run there
cpu=""
case " $LLAMA_CMAKE_ARGS " in
  *"GGML_NATIVE=OFF"*) ;;
  *) cpu=$( (grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null || sysctl -n machdep.cpu.features 2>/dev/null \
             || uname -a) | sha256sum | cut -c1-12) ;;
esac
LLAMA_KEY="$LLAMA_VERSION-$LLAMA_TARGET-$(printf '%s|%s|%s' "$os/$arch" "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS${cpu:+|$cpu}" | sha256sum | cut -c1-12)"
