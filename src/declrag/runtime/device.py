"""Where models run: ``auto`` (the default) takes a CUDA GPU, then Apple's MPS, then the CPU; or name one (``cpu``,
``cuda``, ``cuda:1``, ``mps``). The device never changes an index's address (`declrag.config.EmbedderConfig.identity`
leaves it out): vectors computed on a GPU agree with the CPU's to float rounding (scripts/gpu-check.sh measures it)."""

from __future__ import annotations

import glob
import os
import re
import sys

from ..errors import DeclragError

DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def check(device: str) -> str:
    """``device``, or an error naming it and the values allowed."""
    if not DEVICE.match(device):
        raise DeclragError(f"unknown device {device!r}", hint="use auto, cpu, cuda, cuda:N or mps")
    return device


def gpu_possible() -> bool:
    """Whether this machine may have a GPU that torch can use, known without importing torch (a second and about
    300 MB of memory, which a process on the ONNX embedder never needs otherwise): CUDA and ROCm need their device
    files on Linux (``/dev/nvidia*``, WSL's ``/dev/dxg``, ``/dev/kfd``); elsewhere torch is asked."""
    if not sys.platform.startswith("linux"):
        return True
    return bool(glob.glob("/dev/nvidia*")) or os.path.exists("/dev/dxg") or os.path.exists("/dev/kfd")


def resolve(device: str = "auto") -> str:
    """The torch device ``device`` names: ``auto`` becomes ``cuda``, ``mps`` or ``cpu``, whichever this machine
    has first. A GPU asked for by name that this machine lacks is an error, not a silent CPU run."""
    if check(device) == "cpu" or (device == "auto" and not gpu_possible()):
        return "cpu"
    import torch

    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DeclragError(f"device {device!r}: this machine has no CUDA GPU that torch can use",
                           hint="use device auto (the GPU where there is one, else the CPU) or cpu")
    if device == "mps" and not torch.backends.mps.is_available():
        raise DeclragError("device 'mps': Apple's Metal back end is not available here", hint="use auto or cpu")
    return device


def gpu_layers() -> int:
    """llama.cpp's ``n_gpu_layers`` for in-process local models: every layer (-1) where llama.cpp was built with a
    GPU back end (CUDA, Metal, Vulkan...), none on a CPU-only build; ``DECLRAG_LOCAL_GPU_LAYERS`` overrides it."""
    if (given := os.environ.get("DECLRAG_LOCAL_GPU_LAYERS")) is not None:
        try:
            return int(given)
        except ValueError:
            raise DeclragError(f"DECLRAG_LOCAL_GPU_LAYERS={given!r} is not a whole number",
                               hint="unset it, or give the layers to offload (-1: all, 0: none)") from None
    import llama_cpp

    return -1 if llama_cpp.llama_supports_gpu_offload() else 0
