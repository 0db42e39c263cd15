"""The same hybrid rankings scored on documents and on passages, per chunk size: what passage-level relevance changes
on long files. ``.venv/bin/python benchmarks/scripts/bench_units.py [DATASET] [--every N] [--sizes 128,256,512]`` (default:
squad-v1.1-articles, every 10th question, alpha 0.5, relative fusion); prints a Markdown table."""

from __future__ import annotations

import argparse

import numpy as np

from declrag.ingest.corpus import corpus_store
from declrag.config import ChunkerConfig, IngestConfig
from declrag.embed.embedder import Embedder
from declrag.golden import load_golden
from declrag.metrics.passages import passage_scores
from declrag.metrics.retrieval import doc_ranking, retrieval_scores

METRICS = ("ndcg@10", "hit@1", "hit@5", "hit@20")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default="squad-v1.1-articles")
    ap.add_argument("--every", type=int, default=10, help="score every Nth question of the split")
    ap.add_argument("--sizes", default="128,256,512", help="chunk sizes in tokens (overlap: an eighth)")
    args = ap.parse_args()
    gs = load_golden(args.dataset)
    qs = [e for e in next(iter(gs.splits.values()))[:: args.every] if e.gold]
    print(f"| chunk tokens | scored on ({len(qs)} questions) | " + " | ".join(METRICS) + " |")
    print("|---|---|" + "---|" * len(METRICS))
    for cs in (int(s) for s in args.sizes.split(",")):
        ingest = IngestConfig(chunker=ChunkerConfig(name="fixed", chunk_size=cs, overlap=cs // 8))
        emb = Embedder(ingest.embedder)
        st, _ = corpus_store(gs.documents, ingest, gs.name, embedder=emb, progress=False)
        doc, psg = [], []
        for e, v in zip(qs, emb.embed_queries([e.question for e in qs])):
            hits = st.hybrid_search(e.question, v, 100, 0.5, "relative")
            doc.append(retrieval_scores(doc_ranking(h.doc_id for h in hits), e.gold))
            scored = passage_scores([(h.doc_id, h.start, h.end, h.text) for h in hits], list(e.gold_spans()),
                                    e.answers, e.gold)
            psg.append(scored[0] if scored else dict.fromkeys(METRICS, 0.0))
        for name, rows in (("documents", doc), ("passages", psg)):
            print(f"| {cs} | {name} | " + " | ".join(f"{np.mean([r[m] for r in rows]):.4f}" for m in METRICS) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
