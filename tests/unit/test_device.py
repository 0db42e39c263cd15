"""`declrag.runtime.device`: ``auto`` is the default everywhere models run (embedding, cross-encoder, fine-tuning, the local
model's layers), picks CUDA, then MPS, then the CPU; a device never changes an index's address. On a machine with no
GPU (CI), ``auto`` must be the CPU; scripts/gpu-check.sh checks a GPU machine."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from declrag.runtime import device
from declrag.config import EmbedderConfig, IngestConfig
from declrag.errors import DeclragError
from declrag.optimize._finetune import mixed_precision


def expected_auto() -> str:
    if torch.cuda.is_available():
        return "cuda"
    return "mps" if torch.backends.mps.is_available() else "cpu"


def test_auto_is_the_default_and_picks_the_best_device_here():
    assert EmbedderConfig().device == "auto"
    assert device.resolve() == device.resolve("auto") == expected_auto()
    assert device.resolve("cpu") == "cpu"


def test_the_device_is_not_part_of_an_index_address():
    digests = {IngestConfig(embedder=EmbedderConfig(device=d)).digest() for d in ("auto", "cpu", "cuda", "cuda:1")}
    assert len(digests) == 1


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "CPU", ""])
def test_an_unknown_device_is_refused_naming_it(bad):
    with pytest.raises(ValidationError, match="device"):
        EmbedderConfig(device=bad)
    with pytest.raises(DeclragError, match="unknown device"):
        device.resolve(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_a_gpu_named_where_there_is_none_is_an_error_not_a_silent_cpu_run():
    with pytest.raises(DeclragError, match="no CUDA GPU") as e:
        device.resolve("cuda")
    assert "auto" in str(e.value)


def test_the_embedder_runs_where_auto_says():
    from declrag.embed.embedder import Embedder

    torch_embedder = Embedder(EmbedderConfig(backend="torch"))
    assert torch_embedder.config.device == "auto"
    assert torch_embedder.model.device.type == expected_auto()
    # the default backend, onnx, is ONNX Runtime on the CPU and torch on a GPU: the same vectors, the same index
    assert Embedder()._onnx_here() == (expected_auto() == "cpu")


def test_mixed_precision_only_on_cuda():
    assert mixed_precision("cpu") == {} and mixed_precision("mps") == {}
    if torch.cuda.is_available():
        assert mixed_precision("cuda") in ({"bf16": True}, {"fp16": True})


def test_local_model_layers_follow_the_build_or_the_variable(monkeypatch):
    import llama_cpp

    monkeypatch.delenv("DECLRAG_LOCAL_GPU_LAYERS", raising=False)
    assert device.gpu_layers() == (-1 if llama_cpp.llama_supports_gpu_offload() else 0)
    monkeypatch.setenv("DECLRAG_LOCAL_GPU_LAYERS", "12")
    assert device.gpu_layers() == 12
    monkeypatch.setenv("DECLRAG_LOCAL_GPU_LAYERS", "all")
    with pytest.raises(DeclragError, match="DECLRAG_LOCAL_GPU_LAYERS"):
        device.gpu_layers()
