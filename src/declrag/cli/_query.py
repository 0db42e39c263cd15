"""Commands that ask: search and ask."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..errors import DeclragError
from ..inputs import InputError, turns, user_text
from ._access import DEFAULT_KEYS, AsOpt, KeysOpt, UnlabelledOpt, as_caller, caller_named
from ._app import app
from ._common import AnswerModeOpt, ConfigOpt, ModelOpt, ProgramOpt, StoreOpt, config_from, json_option, out


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="what to look for")],
    store: StoreOpt = None,
    k: Annotated[int, typer.Option("--k", "-k", help="results to return")] = 10,
    alpha: Annotated[float, typer.Option(help="hybrid weight of the vector leg (1 = vector only)")] = 0.5,
    fusion: Annotated[str, typer.Option(help="relative | ranked")] = "relative",
    mode: Annotated[str, typer.Option(help="hybrid | keyword | vector")] = "hybrid",
    window: Annotated[int, typer.Option(help="context-window expansion: neighbouring chunks on each side")] = 0,
    where: Annotated[str | None, typer.Option(help='metadata filter as JSON, e.g. \'{"page": {"$gte": 2}}\'')] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    as_: AsOpt = None,
    keys: KeysOpt = DEFAULT_KEYS,
    unlabelled: UnlabelledOpt = "everyone",
):
    """Search a store: ranked chunks with source, span and score."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from .. import api
    from ..config import SearchParams
    from ..payloads import page_at

    filt = as_caller(as_, keys, unlabelled, json_option(where, "--where"))
    params = config_from(SearchParams, limit=k, alpha=alpha, fusion=fusion, mode=mode, window=window, where=filt)
    hits = api.search(query, store, params)
    if as_json:
        out.print_json(data=[{
            "rank": i + 1, "score": h.score, "chunk_id": h.chunk.id, "doc_id": h.doc_id, "source": h.chunk.source,
            "title": h.chunk.title, "section": h.chunk.section, "page": page_at(h, h.start), "span": [h.start, h.end],
            "text": h.text, "scores": h.scores,
        } for i, h in enumerate(hits)])
        return
    t = Table(title=f"{len(hits)} results for {query!r} ({mode}, alpha={alpha}, {fusion})", show_lines=True)
    for col in ("#", "score", "document", "span", "text"):
        t.add_column(col, overflow="fold")
    for i, h in enumerate(hits, 1):
        name = Path(h.chunk.source).name
        src = h.chunk.title if h.chunk.title and h.chunk.title != Path(name).stem else (name or h.doc_id)
        src += f" p.{page}" if (page := page_at(h, h.start)) else ""  # where the span shown starts
        src += f" › {h.chunk.section}" if h.chunk.section else ""
        snippet = " ".join(h.text.split())
        t.add_row(str(i), f"{h.score:.3f}", src, f"{h.start}-{h.end}",
                  snippet[:300] + ("…" if len(snippet) > 300 else ""))
    out.print(t)


def read_history(path: Path) -> list:
    """The turns of a ``--history`` file, checked (the program checks them again against its own limits)."""
    import json

    hint = 'write [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}] (oldest first)'
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise DeclragError(f"cannot read --history file {path}: {e.strerror}", hint="check the path") from e
    except UnicodeDecodeError as e:
        raise DeclragError(f"--history file {path}: not UTF-8 text (byte {e.start})", hint="save it as UTF-8") from e
    except ValueError as e:
        raise DeclragError(f"--history file {path}: not valid JSON: {e}", hint=hint) from e
    if isinstance(data, dict) and ("history" in data or "messages" in data):
        data = data.get("history", data.get("messages"))
    try:
        return [t.to_dict() for t in turns(data, max_turns=10_000, max_chars=10_000_000)]
    except InputError as e:
        raise DeclragError(f"--history file {path}: {e.message}", hint=e.hint or hint) from e


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="the question")],
    program: ProgramOpt = None,
    config: ConfigOpt = None,
    store: StoreOpt = None,
    model: ModelOpt = None,
    answer_mode: AnswerModeOpt = None,
    where: Annotated[str | None, typer.Option(help="metadata filter as JSON")] = None,
    history: Annotated[Path | None, typer.Option(
        help='the conversation before the question: a JSON file holding [{"role": "user"|"assistant", '
             '"content": "..."}, ...] (oldest first), or an object with that list as "history" or "messages"')] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    as_: AsOpt = None,
    keys: KeysOpt = DEFAULT_KEYS,
    unlabelled: UnlabelledOpt = "everyone",
):
    """Answer a question with citations (the default program, a saved one, or a config), optionally as the next
    turn of a conversation (--history)."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..answering import CLI_FIELDS, AnswerService, ApiError, Request, ServiceSettings
    from ..answering.selection import select_program

    question = user_text(question, "question")  # fails before any model loads; the service checks it again
    filt = json_option(where, "--where")
    access, principal = caller_named(as_, keys, unlabelled)
    turns = read_history(history) if history is not None else None
    choice = select_program(program, config, store, model, answer_mode=answer_mode and answer_mode.value)
    # the answering service every front end shares, on this thread: the same answer as over HTTP and MCP
    service = AnswerService(choice.load(), choice.name, settings=ServiceSettings(max_in_flight=1),
                            access=access).open()
    try:
        answer = service.answer_here(Request(question, filt, turns, "cli ask", CLI_FIELDS, principal=principal))
    except ApiError as e:
        raise DeclragError(e.named(), hint=e.hint) from None
    finally:
        service.close()
    if as_json:  # what /v1/ask answers
        out.print_json(data=answer)
        return
    out.print(answer["answer"], markup=False, highlight=False)
    if answer["abstained"] and (reason := answer["reason"]):
        out.print(reason[0].upper() + reason[1:] + ".", markup=False, highlight=False)
    for c in answer["citations"]:
        where_ = ((c["title"] or Path(c["source"]).name) + (f" p.{c['page']}" if c["page"] else "")
                  + (f" › {c['section']}" if c.get("section") else ""))  # its sheet, slide, chapter or heading
        tag = " (attributed)" if c["attributed"] else " (nearest, for you to check)" if c.get("nearest") else ""
        quoted = " quotes " + ", ".join(f"{a}-{b}" for a, b in c["quotes"]) if c.get("quotes") else ""
        out.print(f"  [{c['n']}] {where_} {c['span'][0]}-{c['span'][1]}{tag}{quoted}: {c['snippet'][:160]}",
                  markup=False, highlight=False)
    if c := answer["caught"]:
        out.print(f"the LM's answer {c['why']} ({c['kind']}): replaced by "
                  + {"extractive": "the passages' own sentences", "retry": "a second try with the strict prompt",
                     "abstention": "an abstention"}[c["replaced_by"]], style="dim", markup=False, highlight=False)
    if dropped := answer["dropped_sentences"]:
        out.print(f"verified: {dropped} unsupported sentence(s) of the LM's answer left out", style="dim")
    u, ms, verdict = answer["usage"]["total"], answer["latency_ms"], answer["judge"]
    if (judge := verdict.get("mode", "off")) != "off":
        out.print(f"judge ({judge}): supported={verdict.get('supported')} action={verdict.get('action')}")
    out.print(f"{u['calls']} LM calls ({u['cached']} cached), {u['tokens_in']} tokens in, {u['tokens_out']} out, "
              f"${u['cost_usd']:.4f}; {ms['total']:.0f} ms", style="dim")

