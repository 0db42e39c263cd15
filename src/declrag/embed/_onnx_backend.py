"""ONNX Runtime backends for the embedder: ``onnx`` (float32) and ``onnx-int8`` (dynamically quantized).

sentence-transformers' own ONNX backend goes through ``optimum-onnx``, whose releases pin transformers below 5
(``pip`` cannot resolve it next to declrag's transformers), so declrag builds the same thing offline from the local
weights (docs/guides/indexing.md): ``torch.onnx.export`` with eager attention (so that ONNX Runtime's transformer
optimizer finds the attention pattern to fuse), ``quantize_dynamic`` for ``onnx-int8`` (int8 weights per channel),
and every file checked against the torch model on sample texts before it is kept (``meta.json``). The files are
cached under ``<cache>/onnx/<sha256 of the weights folder>/``: the content, not the path, names them. Pooling and L2
normalisation are done here in NumPy, as sentence-transformers does them.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import warnings
from functools import cached_property
from pathlib import Path
from typing import Any, get_args

import numpy as np

from ..config import EmbedBackend
from ..errors import DeclragError
from ..text.tokens import fast_tokenizer

log = logging.getLogger(__name__)

BACKENDS: tuple[str, ...] = get_args(EmbedBackend)
EXPORT_VERSION = 1  # bump when the export recipe changes: the cached files are rebuilt
SAMPLES = [
    "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy.",
    "What is the capital city of Australia?",
    "Amoxicillin is a penicillin antibiotic; in a randomized trial of 412 children it shortened otitis media "
    "by 1.6 days (95% CI 0.9 to 2.3) compared with placebo, with more rash and diarrhoea.",
    "x",
]
MIN_COSINE = {"onnx": 0.9999, "onnx-int8": 0.95}  # an export below this on the samples is refused


def _fail(backend: str, folder: Path, why: str) -> DeclragError:
    return DeclragError(f"embedder backend {backend!r} could not be built for {folder}: {why}",
                        hint="set `ingest.embedder.backend: torch`, which runs any sentence-transformers model")


class StModel:
    """What declrag needs to know of a sentence-transformers folder to run it outside sentence-transformers."""

    def __init__(self, folder: Path):
        self.folder = folder
        try:
            modules = json.loads((folder / "modules.json").read_text())
        except (OSError, ValueError):
            modules = [{"type": "sentence_transformers.models.Transformer", "path": ""},
                       {"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}]
        kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
        extra = [k for k in kinds if k not in ("Transformer", "Pooling", "Normalize")]
        if kinds[:2] != ["Transformer", "Pooling"] or extra:
            raise ValueError(f"modules {kinds}: only Transformer + Pooling (+ Normalize) run outside torch")
        pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text())
        if isinstance(named := pooling.get("pooling_mode"), str):  # sentence-transformers 5 saves one name
            modes = [named] if named in ("mean", "cls", "max") else []
        else:
            modes = [m for m in ("mean", "cls", "max") if pooling.get(f"pooling_mode_{m}_tokens")]
        if len(modes) != 1 or any(pooling.get(k) for k in ("pooling_mode_mean_sqrt_len_tokens",
                                                           "pooling_mode_weightedmean_tokens",
                                                           "pooling_mode_lasttoken")):
            raise ValueError(f"pooling {pooling}: only one of mean, cls or max pooling runs outside torch")
        self.pooling = modes[0]
        sbert = folder / "sentence_bert_config.json"
        conf = json.loads(sbert.read_text()) if sbert.is_file() else {}
        self.max_seq_length: int | None = conf.get("max_seq_length")
        self.lower = bool(conf.get("do_lower_case"))
        self.config = json.loads((folder / "config.json").read_text())


def export(folder: Path, digest: str, backend: str, cache: Path) -> Path:
    """The ONNX file of ``backend`` for the model in ``folder`` (content hash ``digest``), built once."""
    from filelock import FileLock

    where = cache / "onnx" / f"{digest}-v{EXPORT_VERSION}"
    target = where / ("model-int8.onnx" if backend == "onnx-int8" else "model.onnx")
    if target.is_file():
        return target
    where.mkdir(parents=True, exist_ok=True)
    with FileLock(str(where / ".lock")):
        if target.is_file():  # another process built it while this one waited
            return target
        _model(folder, backend)  # a model ONNX cannot run is refused here, before a child starts
        log.info("exporting %s to ONNX%s (once; cached in %s)", folder, " and int8" * (backend == "onnx-int8"), where)
        # in a child process: the export loads torch and the model (about 500 MB) for good, which a server on the
        # ONNX embedder never needs afterwards
        p = subprocess.run([sys.executable, "-m", "declrag.embed._onnx_backend", str(folder), str(where), backend],
                           capture_output=True, text=True)
        if p.returncode != 0 or not target.is_file():
            try:
                e = json.loads(p.stderr.strip().splitlines()[-1])
            except (ValueError, IndexError):
                raise _fail(backend, folder, f"the export's process ended with code {p.returncode}: "
                                             f"{p.stderr.strip()[-500:]}") from None
            raise DeclragError(e["message"], hint=e.get("hint"))
    return target


def _model(folder: Path, backend: str) -> StModel:
    try:
        return StModel(folder)
    except (OSError, ValueError, KeyError, IndexError) as e:
        raise _fail(backend, folder, str(e)) from e


def _build(folder: Path, where: Path, backend: str) -> None:
    """What `export` runs in its child process: the float32 file (unless there), then the int8 one, each verified."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the weight-loading bars are noise next to ours (as the torch backend's)
    st = _model(folder, backend)
    fp32 = where / "model.onnx"
    if not fp32.is_file():
        _export_fp32(folder, st, fp32, backend)
        _verify(folder, st, fp32, "onnx")
    if backend == "onnx-int8":
        _quantize(fp32, where / "model-int8.onnx", backend, folder)
        _verify(folder, st, where / "model-int8.onnx", backend)


def _export_fp32(folder: Path, st: StModel, target: Path, backend: str) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    except Exception as e:
        raise _fail(backend, folder, f"transformers could not load it ({type(e).__name__}: {e})") from e
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tok.model_input_names]

    class Encoder(torch.nn.Module):  # keyword arguments: transformers 5's forward() is not positional
        def __init__(self, m: Any):
            super().__init__()
            self.m = m

        def forward(self, *args: Any) -> Any:
            return self.m(**dict(zip(names, args))).last_hidden_state

    enc = tok(SAMPLES[:2], return_tensors="pt", padding=True)
    axes = {n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]}
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        raw = Path(tmp) / "raw.onnx"
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the TorchScript exporter's notes on BERT's ops are not for users
                torch.onnx.export(Encoder(model), tuple(enc[n] for n in names), str(raw), input_names=names,
                                  output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17,
                                  dynamo=False)
        except Exception as e:
            raise _fail(backend, folder, f"torch.onnx.export failed ({type(e).__name__}: {e})") from e
        out = raw
        kind = st.config.get("model_type", "")
        if kind in ("bert", "distilbert", "roberta", "xlm-roberta", "mpnet", "electra"):
            from onnxruntime.transformers.optimizer import optimize_model

            heads, hidden = st.config.get("num_attention_heads", 0), st.config.get("hidden_size", 0)
            try:
                opt = optimize_model(str(raw), model_type="bert", num_heads=heads, hidden_size=hidden)
                fused = opt.get_fused_operator_statistics()
                out = Path(tmp) / "opt.onnx"
                opt.save_model_to_file(str(out))
                log.info("ONNX Runtime fused: %s", {k: v for k, v in fused.items() if v})
            except Exception as e:  # the generic graph optimizations still apply at load
                log.warning("transformer graph fusion skipped for %s (%s: %s)", folder, type(e).__name__, e)
        os.replace(out, target)


def _quantize(fp32: Path, target: Path, backend: str, folder: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = target.with_suffix(".tmp.onnx")
    try:
        # per-channel int8 weights; DefaultTensorType: the fused ops' outputs carry no type for the quantizer
        quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    except Exception as e:
        tmp.unlink(missing_ok=True)
        raise _fail(backend, folder, f"int8 quantization failed ({type(e).__name__}: {e})") from e
    os.replace(tmp, target)


def _verify(folder: Path, st: StModel, path: Path, backend: str) -> None:
    """Keep ``path`` only if it embeds the samples like the torch model does (cosines in meta.json)."""
    from sentence_transformers import SentenceTransformer

    ref = SentenceTransformer(str(folder), device="cpu").encode(SAMPLES, normalize_embeddings=True,
                                                                    show_progress_bar=False)
    got = OnnxEncoder(folder, path).encode(SAMPLES, batch_size=len(SAMPLES))
    cos = [float(c) for c in (np.asarray(ref) * got).sum(axis=1)]
    meta_path = path.parent / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    meta[backend] = {"file": path.name, "sample_cosine_min": round(min(cos), 6)}
    meta_path.write_text(json.dumps(meta, indent=1))
    if min(cos) < MIN_COSINE[backend]:
        path.unlink(missing_ok=True)
        raise _fail(backend, folder, f"its vectors differ from the torch model's (sample cosine {min(cos):.4f} "
                                     f"< {MIN_COSINE[backend]})")


def _omp_threads() -> int:
    """``OMP_NUM_THREADS`` where it is a positive whole number (torch honours it too), else 0: ONNX Runtime's default.
    Read here rather than from torch, so that a process on the ONNX embedder never imports torch."""
    try:
        return max(0, int(os.environ.get("OMP_NUM_THREADS", "0")))
    except ValueError:
        return 0


class OnnxEncoder:
    """Runs an exported model in ONNX Runtime; the subset of SentenceTransformer's API the Embedder uses."""

    def __init__(self, folder: Path, path: Path, max_seq_length: int | None = None, threads: int | None = None):
        self.folder, self.path = folder, path
        self.st = StModel(folder)
        self.max_seq_length = max_seq_length or self.st.max_seq_length
        self.threads = threads

    @cached_property
    def tokenizer(self) -> Any:
        """The model's fast tokenizer (`tokenizers`, as transformers' AutoTokenizer runs it, without importing
        transformers' model code and with it torch): truncated to the model's length, padded to a batch's longest."""
        conf_path = self.folder / "tokenizer_config.json"
        conf = json.loads(conf_path.read_text()) if conf_path.is_file() else {}
        tok = fast_tokenizer(self.folder)
        pad = conf.get("pad_token") or "[PAD]"
        pad = pad.get("content", "[PAD]") if isinstance(pad, dict) else pad
        tok.enable_truncation(self.max_seq_length or min(int(conf.get("model_max_length") or 512), 2**16))
        tok.enable_padding(pad_id=tok.token_to_id(pad) or 0, pad_token=pad)
        return tok

    @cached_property
    def session(self) -> Any:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = self.threads or _omp_threads()  # 0: one per physical core, as torch's default
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return ort.InferenceSession(str(self.path), so, providers=["CPUExecutionProvider"])

    def get_sentence_embedding_dimension(self) -> int:
        dim = self.session.get_outputs()[0].shape[-1]
        return int(dim if isinstance(dim, int) else self.st.config["hidden_size"])

    def encode(self, texts: list[str], batch_size: int = 32, **_: Any) -> np.ndarray:
        """L2-normalised vectors of ``texts``, in order; batches are cut from texts sorted by length, so
        that little padding is computed."""
        if self.st.lower:
            texts = [t.lower() for t in texts]
        names = [i.name for i in self.session.get_inputs()]
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), self.get_sentence_embedding_dimension()), dtype=np.float32)
        for i in range(0, len(texts), batch_size):
            idx = order[i : i + batch_size]
            encs = self.tokenizer.encode_batch([texts[j] for j in idx])
            enc = {"input_ids": [e.ids for e in encs], "attention_mask": [e.attention_mask for e in encs],
                   "token_type_ids": [e.type_ids for e in encs]}
            hidden = self.session.run(None, {n: np.asarray(enc[n], dtype=np.int64) for n in names})[0]
            mask = np.asarray(enc["attention_mask"], dtype=np.float32)[..., None]
            if self.st.pooling == "mean":
                v = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            elif self.st.pooling == "cls":
                v = hidden[:, 0]
            else:
                v = np.where(mask > 0, hidden, -1e9).max(axis=1)
            out[idx] = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return out


if __name__ == "__main__":  # `export`'s child: python -m declrag.embed._onnx_backend FOLDER WHERE BACKEND
    try:
        _build(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
    except DeclragError as err:  # the parent raises it again, as the one line and fix it would have been
        print(json.dumps({"message": err.message, "hint": err.hint}), file=sys.stderr)
        sys.exit(3)
