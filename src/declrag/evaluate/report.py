"""Evaluation reports: Markdown and a self-contained HTML page with plots (score distributions, per-metric
bars with 95% intervals, latency, tokens and cost)."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from ..metrics.passages import UNIT_WORDS


def _plots(out: Path, summary: dict, records: list[dict]) -> list[tuple[str, Path]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = out / "plots"
    folder.mkdir(exist_ok=True)
    made: list[tuple[str, Path]] = []

    def save(fig, title: str, name: str) -> None:
        fig.tight_layout()
        made.append((title, folder / name))
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)

    names = [n for n, v in summary["metrics"].items() if v["mean"] is not None]

    fig, ax = plt.subplots(figsize=(8, max(3, 0.32 * len(names))))
    means = [summary["metrics"][n]["mean"] for n in names]
    lo = [m - summary["metrics"][n]["ci95"][0] for n, m in zip(names, means)]
    hi = [summary["metrics"][n]["ci95"][1] - m for n, m in zip(names, means)]
    ax.barh(names[::-1], means[::-1], xerr=[lo[::-1], hi[::-1]], color="#4c78a8", capsize=3)
    ax.set_xlim(0, 1)
    ax.set_xlabel("mean with 95% bootstrap interval")
    ax.set_title(f"{summary['dataset']} {summary['split']}: {summary['n']} questions")
    save(fig, "Metrics", "metrics.png")

    dist = [n for n in names if len({r["metrics"].get(n) for r in records}) > 2][:9]
    if dist:
        cols = 3
        rows = -(-len(dist) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(9, 2.4 * rows), squeeze=False)
        for ax, n in zip(axes.flat, dist):
            ax.hist([r["metrics"][n] for r in records if r["metrics"].get(n) is not None], bins=20, range=(0, 1),
                    color="#72b7b2")
            ax.set_title(n, fontsize=9)
        for ax in list(axes.flat)[len(dist):]:
            ax.axis("off")
        save(fig, "Score distributions", "distributions.png")

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3))
    a1.hist([r["latency_ms"]["total"] / 1000 for r in records], bins=30, color="#f58518")
    a1.set_xlabel("seconds per question (program)")
    a1.set_title("latency")
    u = summary["usage"]
    parts = ["program", "judges"]
    a2.bar(parts, [u[p]["tokens_in"] for p in parts], label="tokens in", color="#54a24b")
    a2.bar(parts, [u[p]["tokens_out"] for p in parts], bottom=[u[p]["tokens_in"] for p in parts], label="tokens out",
           color="#eeca3b")
    a2.set_title(f"tokens (cost ${u['program']['cost_usd'] + u['judges']['cost_usd']:.4f})")
    a2.legend(fontsize=8)
    save(fig, "Latency and usage", "usage.png")
    return made


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.4f}" if isinstance(x, float) else str(x)


UNDERSPECIFIED_NOTE = ("UNDERSPECIFIED questions (MTRAG) cannot be answered until the user says more: their "
                       "reference answer is the clarifying question, and they are scored against it like the others; "
                       "neither an abstention nor a confident answer is right there, so read them apart.")


def label_tables(by_label: dict[str, dict[str, dict]]) -> list[str]:
    """A markdown table per label (answerability, multi-turn type, ...): each metric's mean per label value."""
    lines: list[str] = []
    for key, groups in by_label.items():
        cols = [c for c in next(iter(groups.values())) if c != "n"]
        lines += ["", f"## By {key.replace('_', ' ')}", "", f"| {key} | n | " + " | ".join(cols) + " |",
                  "|---" * (len(cols) + 2) + "|"]
        lines += [f"| {v} | {g['n']} | " + " | ".join(_fmt(g[c]) for c in cols) + " |" for v, g in groups.items()]
        if key == "answerability" and "UNDERSPECIFIED" in groups:
            lines += ["", UNDERSPECIFIED_NOTE]
    return lines


def markdown(summary: dict, plots: list[tuple[str, Path]], out: Path) -> str:
    s = summary
    lines = [f"# Evaluation: {s['dataset']} / {s['split']}", "",
             f"{s['n']} questions; program `{s['program_digest'][:12]}`; judges: {', '.join(s['judges']) or 'none'}; "
             f"wall {s['wall_s']} s for {s['computed']} new answers"
             + (f" ({s['throughput_qps']} questions/s)" if s.get("throughput_qps") else "") + ".", ""]
    if syn := s.get("synthetic"):
        lines += [f"**Synthetic set**: {syn['questions']} of its {syn['of']} questions were generated "
                  f"({', '.join(syn['generators'])}). {syn['description']}", ""]
    lines += ["| metric | mean | 95% CI | n |", "|---|---|---|---|"]
    for n, v in s["metrics"].items():
        lines.append(f"| {n} | {_fmt(v['mean'])} | [{_fmt(v['ci95'][0])}, {_fmt(v['ci95'][1])}] | {v['n']} |")
    if units := s.get("retrieval_unit"):
        lines += ["", "Retrieval metrics scored over " + ", ".join(
            f"{UNIT_WORDS.get(u, u)} ({n} questions)" for u, n in sorted(units.items())) + "."]
    c = s["confusion"]
    lines += ["", "## RAG confusion matrix (gold passage retrieved x answer correct)", "",
              "| | correct | wrong |", "|---|---|---|",
              f"| gold retrieved | {c['retrieved_correct']} | {c['retrieved_wrong']} |",
              f"| gold missed | {c['missed_correct']} | {c['missed_wrong']} |", "",
              "Correct: token F1 >= 0.5 with a reference, or an abstention on an unanswerable question.", "",
              "## Abstention", "",
              f"all {_fmt(s['abstention']['all'])}; answerable {_fmt(s['abstention']['answerable'])} "
              f"(n={s['abstention']['n_answerable']}); unanswerable {_fmt(s['abstention']['unanswerable'])} "
              f"(n={s['abstention']['n_unanswerable']})"]
    lines += label_tables(s.get("by_label") or {})
    if "bounds" in s:
        names = sorted({m for b in s["bounds"].values() for m in b if m != "abstention"})
        lines += ["", "## Reference bounds", "", "| | " + " | ".join(names) + " | abstention |",
                  "|---" * (len(names) + 2) + "|"]
        rag = {n: s["metrics"].get(n, {}).get("mean") for n in names}
        lines.append("| RAG (this program) | " + " | ".join(_fmt(rag[n]) for n in names)
                     + f" | {_fmt(s['abstention']['all'])} |")
        for kind, vals in s["bounds"].items():
            lines.append(f"| {kind.replace('_', '-')} | " + " | ".join(_fmt(vals.get(n, {}).get("mean")) for n in names)
                         + f" | {_fmt(vals.get('abstention'))} |")
    if "probes" in s:
        lines += ["", "## Robustness probes (expected: abstain)", ""]
        lines += [f"- {k.replace('_', ' ')}: {_fmt(v)}" for k, v in s["probes"].items()]
    u = s["usage"]
    lines += ["", "## Usage", "", "| | calls | cached | tokens in | tokens out | cost $ | LM time s |",
              "|---|---|---|---|---|---|---|"]
    for p in ("program", "judges"):
        lines.append(f"| {p} | {int(u[p]['calls'])} | {int(u[p]['cached'])} | {int(u[p]['tokens_in'])} | "
                     f"{int(u[p]['tokens_out'])} | {u[p]['cost_usd']:.4f} | {u[p]['lm_ms'] / 1000:.1f} |")
    lines += ["", f"Latency per question: p50 {s['latency_ms']['p50']} ms, p95 {s['latency_ms']['p95']} ms.", ""]
    for title, path in plots:
        lines += [f"## {title}", "", f"![{title}]({path.relative_to(out)})", ""]
    return "\n".join(lines)


def _html(md: str, out: Path) -> str:
    """The report's Markdown as one HTML page (markdown-it-py, CommonMark with tables; raw HTML escaped), its
    images inlined so that the page travels alone."""
    from markdown_it import MarkdownIt

    md_it = MarkdownIt("commonmark", {"html": False}).enable("table")

    def image(self, tokens, idx, options, env) -> str:  # noqa: ARG001 - markdown-it's render rule signature
        src = str(tokens[idx].attrGet("src") or "")
        data = base64.b64encode((out / src).read_bytes()).decode()
        return f'<img alt="{html.escape(src)}" src="data:image/png;base64,{data}">'

    md_it.add_render_rule("image", image)
    style = ("body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
             "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .6rem;"
             "text-align:right}td:first-child,th:first-child{text-align:left}img{max-width:100%}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>declrag evaluation</title>"
            f"<style>{style}</style></head><body>" + md_it.render(md) + "</body></html>")


def write_report(out: Path, summary: dict, records: list[dict]) -> None:
    plots = _plots(out, summary, records) if records else []
    md = markdown(summary, plots, out)
    (out / "report.md").write_text(md)
    (out / "report.html").write_text(_html(md, out))

