"""Compile's retriever stage: fine-tune the program's embedding model on the train split (docs/guides/compile.md).

Each train question is an anchor, the passage that holds its gold answer the positive, and the chunks the program
itself ranks high that are not gold the hard negatives; the other questions' positives in a batch are in-batch
negatives (`MultipleNegativesRankingLoss`, batches without duplicates).

Memory: a batch of 32 SciFact rows (96 texts, most at the model's 256-token limit) held about 9 GB on the CPU.
With ``mini_batch_size`` below the batch, the loss is `CachedMultipleNegativesRankingLoss` (GradCache): the same
gradients, the memory of one mini-batch, at the cost of one more forward pass without gradients.

The model is saved as safetensors in a folder named by nothing but its content: `folder_sha256` is the model's
identity in index addresses and in the embedding cache, so nothing embedded with another model is ever reused.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..config import ProgramConfig
from ..embed.embedder import folder_sha256
from ..errors import DeclragError
from ..golden import Example, GoldenSet
from ..metrics.stats import paired_difference
from ..runtime.device import resolve as resolve_device
from ..runtime.process_memory import MemoryTracker, release_memory
from ._objective import Objective, score, tell

log = logging.getLogger(__name__)


def _holds_answer(hit, ex: Example) -> bool:
    starts = [s for s in ex.answer_starts if s is not None and s >= 0]
    return not starts or any(hit.start <= s < hit.end for s in starts)


def training_rows(prog: Any, golden: GoldenSet, examples: list[Example], hard_negatives: int,
                  seed: int = 13, progress: bool = False) -> tuple[list[dict[str, str]], dict[str, int]]:
    """(rows, counts): one row per train question with gold passages, ``{"anchor", "positive",
    "negative_1", ...}``. The positive is the best-ranked candidate of a gold document that holds the answer
    span (when the set has spans), else the gold document's text; the negatives are the best-ranked candidates
    of documents that are not gold (the store's own hard negatives)."""
    rows: list[dict[str, str]] = []
    counts = {"questions": 0, "no_gold": 0, "positive_from_pool": 0, "positive_from_document": 0,
              "short_of_negatives": 0}
    prog.embedder.embed_queries([e.question for e in examples if e.gold])  # batched, then from the cache
    for ex in tqdm(examples, desc="fine-tune: mining hard negatives", unit="q", disable=not progress):
        gold = {d for d, g in ex.gold.items() if g > 0}
        if not gold or not ex.answerable:
            counts["no_gold"] += 1
            continue
        pool = prog.retrieve_only(ex.question)
        positive = next((h.text for h in pool if h.chunk.doc_id in gold and _holds_answer(h, ex)), None)
        if positive is None:
            doc = golden.doc(sorted(gold)[0])
            positive = f"{doc.title}\n{doc.text}" if doc.title else doc.text
            counts["positive_from_document"] += 1
        else:
            counts["positive_from_pool"] += 1
        negatives: list[str] = []
        for h in pool:
            if len(negatives) == hard_negatives:
                break
            if h.chunk.doc_id not in gold and h.text != positive and h.text not in negatives:
                negatives.append(h.text)
        if len(negatives) < hard_negatives:  # every row needs as many columns: fill from random documents
            counts["short_of_negatives"] += 1
            rng = random.Random(f"{seed}:{ex.id}")
            while len(negatives) < hard_negatives:
                d = golden.documents[rng.randrange(len(golden.documents))]
                if d.id not in gold:
                    negatives.append(d.text)
        counts["questions"] += 1
        rows.append({"anchor": ex.question, "positive": positive,
                     **{f"negative_{i + 1}": n for i, n in enumerate(negatives)}})
    return rows, counts


def mixed_precision(where: str) -> dict[str, bool]:
    """The trainer's mixed precision on CUDA (bf16 where the GPU has it, Ampere and later; else fp16); float32
    elsewhere."""
    if not where.startswith("cuda"):
        return {}
    import torch  # only a fine-tune on a GPU asks

    return {"bf16": True} if torch.cuda.is_bf16_supported() else {"fp16": True}


def _budget(base: type, t0: float, max_seconds: float | None, losses: list[float], stopped: dict[str, Any],
            progress: bool) -> Any:
    """A trainer callback (``base``: transformers' `TrainerCallback`, imported by the caller) that keeps the time
    budget, collects the losses into ``losses``, says in ``stopped`` why training stopped, and shows one progress bar
    (steps, loss) instead of the trainer's log lines."""

    class Budget(base):  # type: ignore[misc,valid-type]
        """The time budget, the losses, and one progress bar (steps, loss) instead of the trainer's log lines."""

        bar: Any = None

        def on_train_begin(self, args, state, control, **kw):
            self.bar = tqdm(total=state.max_steps, desc="fine-tune: training", unit="step", disable=not progress)

        def on_step_end(self, args, state, control, **kw):
            self.bar.update(state.global_step - self.bar.n)
            if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
                stopped["by"] = f"time budget ({max_seconds:g} s)"
                control.should_training_stop = True
            return control

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))
                self.bar.set_postfix(loss=f"{losses[-1]:.4f}")

        def on_train_end(self, args, state, control, **kw):
            self.bar.close()

    return Budget()


def finetune_model(base: Path, rows: list[dict[str, str]], out: Path, *, epochs: float, learning_rate: float,
                   batch_size: int, max_steps: int | None, max_seconds: float | None, seed: int,
                   mini_batch_size: int | None = 4, query_prefix: str = "", document_prefix: str = "",
                   progress: bool = False, device: str = "auto") -> dict[str, Any]:
    """Train a copy of the sentence-transformers model in ``base`` on ``rows`` and save it to ``out``
    (safetensors; no pickle). Deterministic given ``seed`` on the same machine and thread count. Stops at
    ``max_steps`` or after ``max_seconds`` (checked between steps). ``mini_batch_size``: texts per forward pass
    when smaller than the batch (the cached loss; None: the whole batch at once). Returns what happened."""
    import torch  # torch, datasets, sentence-transformers: seconds to import, and only a fine-tune needs them
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from transformers.utils import logging as hf_logging

    if not rows:
        raise DeclragError("no training pairs: no train question has a gold passage",
                           hint="fine-tuning needs gold passages (BEIR qrels, SQuAD spans, JSONL `gold`)")
    if len(rows) < 2:
        raise DeclragError("fine-tuning needs at least 2 train questions with gold passages")
    hf_logging.set_verbosity_error()
    torch.manual_seed(seed)
    where = resolve_device(device)
    model = SentenceTransformer(str(base), device=where)
    if query_prefix or document_prefix:
        rows = [{k: (query_prefix if k == "anchor" else document_prefix) + v for k, v in r.items()} for r in rows]
    data = Dataset.from_list(rows)
    batch = max(2, min(batch_size, len(rows)))
    mini = mini_batch_size if mini_batch_size and mini_batch_size < batch else None
    loss = CachedMultipleNegativesRankingLoss(model, mini_batch_size=mini) if mini else \
        MultipleNegativesRankingLoss(model)
    losses: list[float] = []
    stopped: dict[str, Any] = {"by": None}
    t0 = time.perf_counter()

    with tempfile.TemporaryDirectory(prefix="declrag-finetune-") as tmp:
        args = SentenceTransformerTrainingArguments(
            output_dir=tmp, num_train_epochs=epochs, per_device_train_batch_size=batch, learning_rate=learning_rate,
            max_steps=max_steps if max_steps else -1, warmup_ratio=0.1, seed=seed, data_seed=seed,
            batch_sampler=BatchSamplers.NO_DUPLICATES, save_strategy="no", eval_strategy="no", report_to="none",
            logging_steps=1, use_cpu=where == "cpu", dataloader_num_workers=0, disable_tqdm=True,
            **mixed_precision(where))
        budget = _budget(TrainerCallback, t0, max_seconds, losses, stopped, progress)
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss, callbacks=[budget])
        trainer.remove_callback(PrinterCallback)  # the losses show on our bar, not as printed dicts
        state = trainer.train()
    if out.exists():
        shutil.rmtree(out)
    model.save(str(out), create_model_card=False, safe_serialization=True)  # only what loading needs: a stable hash
    steps = int(getattr(trainer.state, "global_step", 0))
    # the trainer holds the model, the optimizer's state and the data; they go before the corpus is re-embedded
    trainer.accelerator.free_memory()
    del trainer, model, loss, data
    release_memory()
    if max_steps and steps >= max_steps and stopped["by"] is None:
        stopped["by"] = f"step budget ({max_steps} steps)"
    return {"steps": steps, "seconds": round(time.perf_counter() - t0, 1), "pairs": len(rows), "batch_size": batch,
            "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
            "train_loss": round(float(state.training_loss), 6), "stopped_by": stopped["by"],
            "loss": "CachedMultipleNegativesRankingLoss" if mini else "MultipleNegativesRankingLoss",
            "mini_batch_size": mini, "device": where,
            "threads": torch.get_num_threads(), "sha256": folder_sha256(out), "cpu_count": os.cpu_count()}


def finetune_stage(comp: Objective, prog, out: Path, progress: bool,
                   mem: MemoryTracker | None = None) -> tuple[Any, dict[str, Any]]:
    """Fine-tune ``prog``'s embedding model on the train split, re-embed the corpus into a new index, and keep the
    tuned model only if dev improves beyond the bootstrap noise (the paired interval of the per-question objective
    excludes 0). Returns (the program kept, the report). ``mem`` measures the peak RSS of its parts."""
    spec, splits = comp.space.finetune, comp.splits
    base_cfg: ProgramConfig = prog.config
    info: dict[str, Any] = {"enabled": True, "base_model": base_cfg.ingest.embedder.model,
                            "settings": spec.model_dump(mode="json"), "split": "train"}
    train = splits.get("train") or []
    if not any(e.gold for e in train):
        info["skipped"] = ("the train split is empty: give it a share in split.fractions" if not train else
                           "the golden set has no gold passages (qrels, answer spans or JSONL `gold`) to train on")
        tell(progress, f"fine-tune skipped: {info['skipped']}")
        return prog, info
    mem = mem or MemoryTracker()
    t0 = t_stage = time.perf_counter()
    with mem.stage("finetune.mining"):
        rows, counts = training_rows(prog, comp.golden, train, spec.hard_negatives, spec.seed, progress)
    info["mining_s"], info["pairs"] = round(time.perf_counter() - t0, 1), counts
    tuned_dir = out / "finetune" / "embedder"
    e = base_cfg.ingest.embedder
    with mem.stage("finetune.training"):
        trained = finetune_model(prog.embedder.folder, rows, tuned_dir, epochs=spec.epochs,
                                 learning_rate=spec.learning_rate, batch_size=spec.batch_size,
                                 max_steps=spec.max_steps,
                                 max_seconds=spec.max_minutes * 60 if spec.max_minutes else None, seed=spec.seed,
                                 mini_batch_size=spec.mini_batch_size, query_prefix=e.query_prefix,
                                 document_prefix=e.document_prefix, progress=progress, device=e.device)
    info["training"] = trained
    emb = e.model_copy(update={"model": str(tuned_dir.resolve()), "weights": trained["sha256"]})
    cfg = base_cfg.model_copy(update={"ingest": base_cfg.ingest.model_copy(update={"embedder": emb})})
    t0 = time.perf_counter()
    with mem.stage("finetune.reembed"):
        tuned = comp.program_for(cfg)  # a new index: its address holds the tuned model's hash
    info["reembed_s"] = round(time.perf_counter() - t0, 1)
    with mem.stage("finetune.scoring"):
        tuned.learned_from(prog)  # the prompts (instructions, demos) the earlier stages chose
        tuned.embedder_provenance = {"base_model": e.model, "sha256": trained["sha256"], "split": "train",
                                     "questions": counts["questions"], "seed": spec.seed, "steps": trained["steps"],
                                     "loss": trained["loss"], "settings": spec.model_dump(mode="json")}
        for part in ("dev", "test"):  # test for the report only: the decision reads dev
            (base, q_base), (new, q_new) = (score(comp, p, splits[part], f"{part}, {name} embedder")
                                            for p, name in ((prog, "base"), (tuned, "tuned")))
            info[part] = {"base": base, "tuned": new, "gain": paired_difference(q_base, q_new)}
        gain = info["dev"]["gain"]
        keep = bool(gain["significant"] and (gain["diff"] or 0) > 0)
        info["kept"] = "tuned" if keep else "base"
        alpha = base_cfg.retrieve.alpha
        if comp.space.objective.retrieval_only and alpha not in (0.0, 1.0):  # the vector leg alone, both models
            legs = {}
            for name, c in (("base", base_cfg), ("tuned", cfg)):
                leg = comp.program_for(c.model_copy(update={"retrieve": c.retrieve.model_copy(update={"alpha": 1.0})}))
                legs[name] = score(comp, leg, splits["test"], f"test, vector leg, {name} embedder")[0]
            info["test"]["vector_leg"] = legs
    info["stage_s"] = round(time.perf_counter() - t_stage, 1)
    info["memory"] = {k.split(".", 1)[1]: v for k, v in mem.stages.items() if k.startswith("finetune.")}
    d, dev = gain["diff"] or 0.0, info["dev"]
    tell(progress, f"fine-tune: {trained['steps']} steps in {trained['seconds']} s, "
                   f"re-embedding {info['reembed_s']} s; "
                   f"dev {dev['base']['objective']:.4f} -> {dev['tuned']['objective']:.4f} ({d:+.4f}, 95% CI "
                   f"[{gain['ci95'][0] or 0:+.4f}, {gain['ci95'][1] or 0:+.4f}]): keeping the "
                   + ("tuned model" if keep else "base model (no gain beyond the noise)"))
    return (tuned if keep else prog), info
