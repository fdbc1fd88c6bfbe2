"""Knowledge commands: ``base …``, ``add``, ``items``, ``delete``, ``reindex``, ``chunks``, ``search``."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from app.cli.commands_core import opened
from app.cli.main import Output, UsageError
from knowledge import lifecycle
from knowledge.errors import InvalidInput
from knowledge.library import Location, bases
from knowledge.search import MODES, search
from knowledge.store.schema import ITEM_STATUSES


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    base = sub.add_parser("base", parents=[common], help="create, list, show, rename, lock, unlock, delete bases")
    bsub = base.add_subparsers(dest="base_command", metavar="ACTION", parser_class=type(base))
    bsub.required = True
    p = bsub.add_parser("create", parents=[common], help="create a knowledge base")
    p.add_argument("name")
    p.add_argument("--model", default="all-MiniLM-L6-v2")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto")
    p.add_argument("--chunk-size", type=int, default=bases.DEFAULT_CHUNK_SIZE)
    p.add_argument("--chunk-overlap", type=int, default=bases.DEFAULT_CHUNK_OVERLAP)
    p.set_defaults(func=cmd_base_create)
    p = bsub.add_parser("list", parents=[common], help="list bases")
    p.set_defaults(func=cmd_base_list)
    for action, fn in (
        ("show", cmd_base_show),
        ("lock", cmd_base_lock),
        ("unlock", cmd_base_unlock),
        ("delete", cmd_base_delete),
    ):
        p = bsub.add_parser(action, parents=[common], help=f"{action} a base")
        p.add_argument("base", help="base name or id")
        p.set_defaults(func=fn)
    p = bsub.add_parser("rename", parents=[common], help="rename a base")
    p.add_argument("base")
    p.add_argument("new_name")
    p.set_defaults(func=cmd_base_rename)

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
    p.set_defaults(func=cmd_items)

    for name, fn in (("delete", cmd_delete), ("reindex", cmd_reindex)):
        p = sub.add_parser(name, parents=[common], help=f"{name} items (and everything inside them)")
        p.add_argument("base")
        p.add_argument("items", nargs="+", type=int)
        p.set_defaults(func=fn)

    p = sub.add_parser("chunks", parents=[common], help="list a completed item's chunks")
    p.add_argument("base")
    p.add_argument("item", type=int)
    p.set_defaults(func=cmd_chunks)

    p = sub.add_parser("search", parents=[common], help="search a base")
    p.add_argument("base")
    p.add_argument("query", nargs="?")
    p.add_argument(
        "--queries-file", type=Path, help='JSON lines {"id", "text"}: one JSON line {"id", "hits", "elapsed_ms"} each'
    )
    p.add_argument("--mode", choices=MODES, default="hybrid")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--subtree", type=int, help="only inside this item")
    p.set_defaults(func=cmd_search)


def _base_text(b: dict[str, Any]) -> str:
    lock = " locked" if b["locked"] else ""
    return f"{b['id']:>4} {b['name']} [{b['status']}{lock}] {b['model_id']} {b['precision']} chunk {b['chunk_size']}"


def cmd_base_create(args: argparse.Namespace, out: Output) -> int:
    from knowledge.ingest import default_precision, model_spec

    spec = model_spec(args.model)
    precision = default_precision() if args.precision == "auto" else args.precision
    with opened(args) as quire:
        created = bases.create_base(
            quire.db,
            args.name,
            model_id=spec.model_id,
            dimension=spec.dimension,
            precision=precision,
            chunk_size=args.chunk_size,
            chunk_overlap=args.chunk_overlap,
        )
    out.emit(created.as_dict(), _base_text)
    return 0


def cmd_base_list(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        rows = [b.as_dict() for b in bases.list_bases(quire.db)]
    out.emit({"bases": rows}, lambda d: "\n".join(_base_text(b) for b in d["bases"]) or "no knowledge bases")
    return 0


def cmd_base_show(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        base = bases.get_base(quire.db, args.base)
        data = {**base.as_dict(), "items": bases.base_summary(quire.db, base.id)}
    out.emit(data, lambda d: _base_text(d) + "\n" + json.dumps(d["items"]))
    return 0


def cmd_base_rename(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        out.emit(bases.rename_base(quire.db, args.base, args.new_name).as_dict(), _base_text)
    return 0


def cmd_base_lock(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        out.emit(bases.set_locked(quire.db, args.base, True).as_dict(), _base_text)
    return 0


def cmd_base_unlock(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        out.emit(bases.set_locked(quire.db, args.base, False).as_dict(), _base_text)
    return 0


def cmd_base_delete(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        gone = bases.delete_base(quire.db, quire.queue, args.base, quire.blobs_dir)
    out.emit({"deleted": gone.as_dict()}, f"deleted knowledge base {gone.name!r}")
    return 0


def cmd_add(args: argparse.Namespace, out: Output) -> int:
    inputs: list[lifecycle.ItemInput] = [lifecycle.PathInput(p) for p in args.paths]
    inputs += [lifecycle.NoteInput(n, args.title) for n in args.note]
    if not inputs:
        raise UsageError("give at least one path or --note")
    with opened(args) as quire:
        changes = lifecycle.add_items(quire, args.base, inputs, owner=_person())
        created = [lifecycle.get_item(quire, changes.base_id, i).as_dict() for i in changes.created]
        if getattr(args, "sync", False):
            from knowledge import sync

            for item in created:
                if item["type"] == "directory":
                    item["sync"] = sync.enable_sync(quire, changes.base_id, item["id"], mode=args.sync_mode).as_dict()
    out.emit(
        {**changes.as_dict(), "items": created},
        lambda d: "\n".join(f"{i['id']:>6} {i['type']:<9} {i['status']:<10} {i['name']}" for i in d["items"]),
    )
    return 0


def _person() -> str:
    import getpass

    try:
        return f"person:{getpass.getuser()}"
    except Exception:
        return "person:unknown"


def _item_line(i: dict[str, Any]) -> str:
    error = f"  {i['error_code']}: {i['error_message']}" if i["error_code"] else ""
    return f"{i['id']:>6} {i['type']:<9} {i['status']:<10} {i['relative_path'] or i['name']}{error}"


def cmd_items(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        found = lifecycle.list_items(
            quire, args.base, parent_id=args.parent, status=args.status, flat=args.parent is None
        )
    rows = [i.as_dict() for i in found]
    out.emit({"items": rows}, lambda d: "\n".join(_item_line(i) for i in d["items"]) or "no items")
    return 0


def cmd_delete(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        changes = lifecycle.delete_items(quire, args.base, args.items)
    out.emit(changes.as_dict(), f"deleting {len(changes.statuses)} item(s)" if not changes.noop else "nothing to do")
    return 0


def cmd_reindex(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        changes = lifecycle.reindex_items(quire, args.base, args.items)
    out.emit(changes.as_dict(), "reindex queued" if not changes.noop else "nothing to do")
    return 0


def cmd_chunks(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        rows = lifecycle.list_item_chunks(quire, args.base, args.item)
    out.emit({"chunks": rows}, lambda d: "\n\n".join(_chunk_text(c) for c in d["chunks"]))
    return 0


def _chunk_text(c: dict[str, Any]) -> str:
    return f"#{c['ordinal']} ({Location.of(c).describe()})\n{c['text']}"


def cmd_search(args: argparse.Namespace, out: Output) -> int:
    if (args.query is None) == (args.queries_file is None):
        raise UsageError("give a QUERY or --queries-file, not both")
    with opened(args) as quire:
        if args.queries_file is None:
            hits = [
                h.as_dict()
                for h in search(quire, args.base, args.query, mode=args.mode, limit=args.limit, subtree=args.subtree)
            ]
            out.emit({"query": args.query, "mode": args.mode, "hits": hits}, _hits_text)
            return 0
        for line in _read_queries(args.queries_file):
            started = time.perf_counter()
            found = search(quire, args.base, line["text"], mode=args.mode, limit=args.limit, subtree=args.subtree)
            elapsed_ms = (time.perf_counter() - started) * 1000
            # elapsed_ms: this query's search inside this process (query encoding included; the first
            # query of a process also loads the model), for benchmarks and scripts
            out.line({"id": line["id"], "hits": [h.as_dict() for h in found], "elapsed_ms": round(elapsed_ms, 3)})
    return 0


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
        where = Location.of(h["location"]).short()
        lines.append(f"{n:>2}. {h['score']:.4f} {h['source_path'] or h['item_name']} {where}\n    {h['snippet']}")
    return "\n".join(lines) or "no results"
