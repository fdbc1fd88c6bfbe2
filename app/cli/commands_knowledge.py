"""Item commands: ``add``, ``items``, ``delete``, ``reindex``, ``chunks``, ``search``, ``related`` (the ``base``
commands are :mod:`app.cli.commands_bases`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from app.cli.base import Output, UsageError
from app.cli.commands_core import opened, person_of
from app.cli.paging import add_paging, limit_of, next_cursor, paged, with_more
from knowledge import folder_runs, lifecycle
from knowledge.errors import InvalidInput
from knowledge.library import Location, agent_exclusions
from knowledge.search import FILTER_MODE, MODES, Answer, answer, related
from knowledge.store.schema import ITEM_STATUSES


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("add", parents=[common], help="add files, folders or a note to a base")
    p.add_argument("base")
    p.add_argument("paths", nargs="*", type=Path)
    p.add_argument("--note", action="append", default=[], help="add a note with this text (repeatable)")
    p.add_argument("--title", help="title of the note")
    p.add_argument("--sync", action="store_true", help="keep the added folders in sync with disk")
    p.add_argument("--sync-mode", choices=("auto", "review"), default="auto", help="with --sync (default auto)")
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("items", parents=[common], help="list a base's items")
    p.add_argument("base")
    p.add_argument("--status", choices=ITEM_STATUSES)
    p.add_argument("--parent", type=int, help="only the children of this item (default: every item)")
    p.add_argument("--stale", action="store_true", help="only items made by another parser, chunker or model")
    add_paging(p)
    p.add_argument(
        "--sources-after",
        type=int,
        default=0,
        metavar="CURSOR",
        help="with --status failed|skipped: the folder-run sources after this cursor (`run_outcomes_next`)",
    )
    p.set_defaults(func=cmd_items)

    p = sub.add_parser("delete", parents=[common], help="delete items (and everything inside them)")
    p.add_argument("base")
    p.add_argument("items", nargs="+", type=int)
    p.set_defaults(func=cmd_delete)
    p = sub.add_parser("reindex", parents=[common], help="reindex items (and everything inside them)")
    p.add_argument("base")
    p.add_argument("items", nargs="*", type=int, help="items to reindex (with --failed: only inside these)")
    p.add_argument(
        "--failed", action="store_true", help="retry only the failed items (not skipped ones) of the base or ITEMS"
    )
    p.add_argument("--stale", action="store_true", help="re-derive exactly the base's stale items")
    p.set_defaults(func=cmd_reindex)

    p = sub.add_parser("chunks", parents=[common], help="list a completed item's chunks")
    p.add_argument("base")
    p.add_argument("item", type=int)
    add_paging(p)
    p.set_defaults(func=cmd_chunks)

    p = sub.add_parser(
        "search",
        parents=[common],
        help='search a base (README "Search syntax": "phrase", -word, type:, in:, after:; filters alone: newest first)',
    )
    p.add_argument("base")
    p.add_argument("query", nargs="?")
    p.add_argument(
        "--query", dest="query_option", metavar="QUERY", help='the query, for one that begins with "-": --query="-x y"'
    )
    p.add_argument(
        "--queries-file", type=Path, help='JSON lines {"id", "text"}: one JSON line {"id", "hits", "elapsed_ms"} each'
    )
    p.add_argument(
        "--mode",
        choices=MODES,
        default="hybrid",
        help="hybrid: both rankings, fused as fitted on judged queries; hybrid-rrf: both, by reciprocal-rank fusion",
    )
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--subtree", type=int, help="only inside this item")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser(
        "related", parents=[common], help="the documents nearest in meaning to an item, with the passages that match"
    )
    p.add_argument("base")
    p.add_argument("item", type=int, help="an item id (a folder: its documents together)")
    p.add_argument("--limit", type=int, default=10, help="at most this many documents (1-100, default 10)")
    p.add_argument("--subtree", type=int, help="only documents inside this item")
    p.set_defaults(func=cmd_related)


def cmd_add(args: argparse.Namespace, out: Output) -> int:
    inputs: list[lifecycle.ItemInput] = [lifecycle.PathInput(p) for p in args.paths]
    inputs += [lifecycle.NoteInput(n, args.title) for n in args.note]
    if not inputs:
        raise UsageError("give at least one path or --note")
    with opened(args) as quire:
        changes = lifecycle.add_items(quire, args.base, inputs, owner=person_of(quire))
        created = [lifecycle.get_item(quire, changes.base_id, i).as_dict() for i in changes.created]
        if getattr(args, "sync", False):
            from knowledge import sync

            for item in created:
                if item["type"] == "directory":
                    item["sync"] = sync.enable_sync(quire, changes.base_id, item["id"], mode=args.sync_mode).as_dict()
        if quire.run_pinned_here():  # a team store: this machine walks its folders and uploads their files
            for item in created:
                item.update(lifecycle.get_item(quire, changes.base_id, item["id"]).as_dict())
    out.emit({**changes.as_dict(), "items": created}, _added_text)
    return 0


def _added_text(d: dict[str, Any]) -> str:
    """One line per input: what adding it did (created, already present — refreshed or not — or covered)."""
    by_id = {i["id"]: i for i in d["items"]}
    lines = []
    for o in d["outcomes"]:
        item = by_id.get(o["item_id"])
        if item is not None:
            lines.append(f"{item['id']:>6} {item['type']:<9} {item['status']:<10} {item['name']}")
        elif o["outcome"] == "already_present":
            note = "refreshing what changed" if o["refreshed"] else "unchanged"
            lines.append(f"{o['item_id']:>6} already present ({note}): {o['input']}")
        else:
            lines.append(f"{o['item_id']:>6} already covered by this item: {o['input']}")
    return "\n".join(lines)


def _item_line(i: dict[str, Any]) -> str:
    error = f"  {i['error_code']}: {i['error_message']}" if i["error_code"] else ""
    away = "  (not on this machine)" if i.get("source") == "not on this machine" else ""
    kept = "  (kept from agents)" if i.get("kept_from_agents") else ""
    return f"{i['id']:>6} {i['type']:<9} {i['status']:<10} {i['relative_path'] or i['name']}{away}{kept}{error}"


def cmd_items(args: argparse.Namespace, out: Output) -> int:
    limit = limit_of(args)
    if args.sources_after < 0:
        raise UsageError("--sources-after takes a cursor from an earlier page (`run_outcomes_next`)")
    with opened(args) as quire:
        if args.stale:
            if args.parent is not None or args.status is not None:
                raise UsageError("--stale lists every stale item; it takes no --parent or --status")
            found = lifecycle.stale_items(quire, args.base, after_id=args.after, limit=limit)
        else:
            found = lifecycle.list_items(
                quire,
                args.base,
                parent_id=args.parent,
                status=args.status,
                flat=args.parent is None,
                after_id=args.after,
                limit=limit,
            )
        sources = _run_sources(quire, args, limit)
        kept = agent_exclusions.kept_from_agents(quire, args.base)  # empty for an agent: it sees none of them
    from knowledge.portable.relocate import source_presence

    rows = [
        {
            **i.as_dict(),
            "source": source_presence(i.source_path, i.source_unverified),
            "kept_from_agents": i.id in kept,
            **({"stale": True} if args.stale else {}),
        }
        for i in found
    ]
    more = next_cursor(found, limit, lambda i: i.id)
    answer = paged("items", rows, more)
    if sources is not None:
        sources_more = next_cursor(sources, limit, lambda s: s.outcome_id)
        answer.update(run_outcomes=[s.as_dict() for s in sources], run_outcomes_next=sources_more)
    out.emit(answer, lambda d: _items_text(d, more))
    return 0


def _run_sources(quire: Any, args: argparse.Namespace, limit: int) -> list[folder_runs.UnindexedSource] | None:
    """Folder-run sources that settled failed or skipped without an item: they have no item id, so they are a
    second listing with its own cursor beside the items (one keyset cursor cannot order two id spaces)."""
    if args.stale or args.parent is not None or args.status not in folder_runs.UNINDEXED_DISPOSITIONS:
        return None
    return folder_runs.list_unindexed_sources(quire, args.base, args.status, after_id=args.sources_after, limit=limit)


def _items_text(d: dict[str, Any], more: int | None) -> str:
    text = with_more("\n".join(_item_line(i) for i in d["items"]) or "no items", more)
    if "run_outcomes" not in d:
        return text
    if not d["run_outcomes"]:
        return f"{text}\nno folder-run sources settled that way without an item"
    lines = [
        f"{s['run_id']:>6} {s['disposition']:<18} {s['relative_path']}  {s['reason'] or ''}" for s in d["run_outcomes"]
    ]
    sources = "\n".join(["folder-run sources with no item (run, outcome, path in the run's folder, reason):", *lines])
    if d["run_outcomes_next"] is not None:
        sources += f"\n(more sources: --sources-after {d['run_outcomes_next']})"
    return f"{text}\n\n{sources}"


def cmd_delete(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        changes = lifecycle.delete_items(quire, args.base, args.items)
    out.emit(changes.as_dict(), f"deleting {len(changes.statuses)} item(s)" if not changes.noop else "nothing to do")
    return 0


def cmd_reindex(args: argparse.Namespace, out: Output) -> int:
    if args.failed and args.stale:
        raise UsageError("--failed and --stale go one at a time")
    if args.failed:
        with opened(args) as quire:
            retried = lifecycle.reindex_failed(quire, args.base, args.items)
            quire.run_pinned_here()
        count = len(retried.item_ids)
        out.emit(
            {**retried.changes.as_dict(), "retried": retried.item_ids},
            f"retrying {count} failed item(s)" if count else "no failed items",
        )
        return 0
    if args.stale == bool(args.items):
        raise UsageError("reindex takes item ids, --stale or --failed")
    with opened(args) as quire:
        if args.stale:
            changes = lifecycle.reindex_stale(quire, args.base)
        else:
            changes = lifecycle.reindex_items(quire, args.base, args.items)
        quire.run_pinned_here()  # a team store: the files are read again (and uploaded) on this machine
    out.emit(changes.as_dict(), "reindex queued" if not changes.noop else "nothing to do")
    return 0


def cmd_chunks(args: argparse.Namespace, out: Output) -> int:
    limit = limit_of(args)
    with opened(args) as quire:
        rows = lifecycle.list_item_chunks(quire, args.base, args.item, after_id=args.after, limit=limit)
    more = next_cursor(rows, limit, lambda c: int(c["chunk_id"]))
    out.emit(paged("chunks", rows, more), lambda d: with_more("\n\n".join(_chunk_text(c) for c in d["chunks"]), more))
    return 0


def _chunk_text(c: dict[str, Any]) -> str:
    ocr = ", OCR" if c.get("ocr") else ""
    return f"#{c['ordinal']} ({Location.of(c).describe()}{ocr})\n{c['text']}"


def cmd_search(args: argparse.Namespace, out: Output) -> int:
    if args.query is not None and args.query_option is not None:
        raise UsageError("give the query once: as QUERY or as --query")
    args.query = args.query if args.query is not None else args.query_option
    if (args.query is None) == (args.queries_file is None):
        raise UsageError("give a QUERY or --queries-file, not both")
    with opened(args) as quire:
        if args.queries_file is None:
            found = answer(quire, args.base, args.query, mode=args.mode, limit=args.limit, subtree=args.subtree)
            if found.degraded is not None and not out.as_json:  # JSON carries it as "degraded"
                print(f"quire: {found.degraded.notice}", file=sys.stderr)
            data = {"query": args.query, "mode": found.mode, "hits": [h.as_dict() for h in found.hits]}
            out.emit({**data, **_degraded(found)}, _hits_text)
            return 0
        for line in _read_queries(args.queries_file):
            started = time.perf_counter()
            found = answer(quire, args.base, line["text"], mode=args.mode, limit=args.limit, subtree=args.subtree)
            elapsed_ms = (time.perf_counter() - started) * 1000
            # elapsed_ms: this query's search inside this process (query encoding included; the first
            # query of a process also loads the model), for benchmarks and scripts
            hits = [h.as_dict() for h in found.hits]
            out.line({"id": line["id"], "hits": hits, "elapsed_ms": round(elapsed_ms, 3), **_degraded(found)})
    return 0


def _degraded(found: Answer) -> dict[str, Any]:
    """``"degraded": {"mode", "code", "message"}`` when meaning search was unavailable (keyword results)."""
    return {} if found.degraded is None else {"degraded": found.degraded.as_dict()}


def _read_queries(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InvalidInput(f"cannot read the queries file: {exc.strerror}") from None
    queries = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
            queries.append({"id": obj["id"], "text": str(obj["text"])})
        except (ValueError, KeyError, TypeError):
            raise InvalidInput(f"line {n} of the queries file is not a JSON object with id and text") from None
    return queries


def _hits_text(d: dict[str, Any]) -> str:
    lines = []
    for n, h in enumerate(d["hits"], start=1):
        where = Location.of(h["location"]).short() + (" OCR" if h.get("ocr") else "")
        score = "" if d["mode"] == FILTER_MODE else f"{h['score']:.4f} "  # a listing has no relevance to show
        lines.append(f"{n:>2}. {score}{h['source_path'] or h['item_name']} {where}\n    {h['snippet']}")
        if h.get("linked_from"):
            lines.append("    linked from: " + ", ".join(b["name"] for b in h["linked_from"]))
    return "\n".join(lines) or "no results"


def cmd_related(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        found = related(quire, args.base, args.item, limit=args.limit, subtree=args.subtree)
    out.emit({"item": args.item, "related": [r.as_dict() for r in found]}, _related_text)
    return 0


def _related_text(d: dict[str, Any]) -> str:
    lines = []
    for n, r in enumerate(d["related"], start=1):
        lines.append(f"{n:>2}. {r['score']:.4f} {r['path']}")
        for label, side in (("this", r["why"]["item"]), ("that", r["why"]["related"])):
            where = Location.of(side["location"]).short()
            lines.append(f"    {label} #{side['ordinal']} {where}: {side['snippet']}")
    return "\n".join(lines) or "no related documents"
