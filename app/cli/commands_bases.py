"""Base commands: ``base create``, ``list``, ``show``, ``ocr-language``, ``rename``, ``confirm-endpoint``,
``lock``, ``unlock``, ``delete``. This module makes the ``base`` group; :mod:`app.cli.commands_portable` adds
``export``, ``import`` and ``relocate`` to it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.cli.base import Output, UsageError
from app.cli.commands_core import opened
from app.cli.paging import add_paging, limit_of, next_cursor, paged, with_more
from knowledge import lifecycle
from knowledge.ingest import DEFAULT_MODEL_ID, CallSettings, remote_embedder_config
from knowledge.library import bases
from knowledge.store import machine_folders


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    base = sub.add_parser("base", parents=[common], help="create, list, show, rename, lock, unlock, delete bases")
    bsub = base.add_subparsers(dest="base_command", metavar="ACTION", parser_class=type(base))
    bsub.required = True
    p = bsub.add_parser("create", parents=[common], help="create a knowledge base")
    p.add_argument("name")
    p.add_argument(
        "--model",
        default=None,
        help="packaged model id (all-MiniLM-L6-v2, English; multilingual-e5-small, any language), or the remote "
        "model's name with --embedder http",
    )
    p.add_argument(
        "--multilingual",
        action="store_true",
        help="the multilingual model: a query in one language finds documents in another (slower to ingest)",
    )
    p.add_argument(
        "--precision", choices=("auto", "fp32", "bf16"), help="default: the bases.default_precision preference"
    )
    p.add_argument(
        "--backend", choices=("auto", "openvino", "torch"), help="default: the bases.default_backend preference"
    )
    p.add_argument("--chunk-size", type=int, help="default: the bases.default_chunk_size preference")
    p.add_argument("--chunk-overlap", type=int, default=bases.DEFAULT_CHUNK_OVERLAP)
    p.add_argument("--embedder", choices=("local", "http"), default="local", help="http: an OpenAI-compatible endpoint")
    p.add_argument("--endpoint", help="the endpoint's base URL (…/v1/embeddings is added)")
    p.add_argument("--dimensions", type=int, help="vector length (asked from the endpoint when left out)")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key (read at call time)")
    defaults = CallSettings()
    p.add_argument("--timeout", type=float, default=defaults.timeout, help="seconds per request")
    p.add_argument("--max-retries", type=int, default=defaults.max_retries)
    p.add_argument("--rate", type=float, default=defaults.rate_per_second, help="requests per second")
    p.add_argument("--concurrency", type=int, default=defaults.max_concurrency, help="requests in flight at most")
    p.set_defaults(func=cmd_base_create)
    p = bsub.add_parser("list", parents=[common], help="list bases")
    add_paging(p)
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
    p = bsub.add_parser(
        "ocr-language", parents=[common], help="show or set the OCR language of a base's scans and images"
    )
    p.add_argument("base", help="base name or id")
    p.add_argument("language", nargs="?", help="Tesseract language code(s), e.g. eng or eng+deu")
    p.set_defaults(func=cmd_base_ocr_language)
    p = bsub.add_parser("rename", parents=[common], help="rename a base")
    p.add_argument("base")
    p.add_argument("new_name")
    p.set_defaults(func=cmd_base_rename)
    p = bsub.add_parser(
        "confirm-endpoint", parents=[common], help="allow an imported base to send texts to its remote endpoint"
    )
    p.add_argument("base", help="base name or id")
    p.set_defaults(func=cmd_base_confirm_endpoint)


def _base_text(b: dict[str, Any]) -> str:
    lock = " locked" if b["locked"] else ""
    remote = b.get("embedder")
    model = f"http {remote['model']} at {remote['endpoint']}" if remote else b["model_id"]
    backend = "" if remote else f" {b['backend']}"
    return f"{b['id']:>4} {b['name']} [{b['status']}{lock}] {model} {b['precision']}{backend} chunk {b['chunk_size']}"


def _embedder_text(remote: dict[str, Any] | None) -> str:
    if not remote:
        return "embedder: packaged model"
    s = remote["settings"]
    key = f", API key from ${remote['api_key_env']}" if remote.get("api_key_env") else ""
    unconfirmed = remote.get(bases.ENDPOINT_UNCONFIRMED)
    held = " — endpoint needs confirming (quire base confirm-endpoint)" if unconfirmed else ""
    return (
        f"embedder{held}: http {remote['model']} at {remote['endpoint']} ({remote['dimension']} dimensions{key})\n"
        f"calls: timeout {s['timeout']}s, {s['max_retries']} retries (backoff {s['backoff_base']}s…{s['backoff_max']}s "
        f"with jitter, Retry-After honoured), {s['rate_per_second']}/s (burst {s['burst']}), "
        f"{s['max_concurrency']} in flight, {s['batch_size']} texts per request"
    )


def cmd_base_create(args: argparse.Namespace, out: Output) -> int:
    if args.embedder == "http":
        if args.multilingual:
            raise UsageError("--multilingual is a packaged model, not --embedder http")
        if args.backend not in (None, "auto"):
            raise UsageError("--backend goes with the packaged model, not --embedder http")
        return _create_remote_base(args, out)
    if args.endpoint or args.api_key_env or args.dimensions:
        raise UsageError("--endpoint, --dimensions and --api-key-env go with --embedder http")
    from knowledge import preferences
    from knowledge.ingest import MULTILINGUAL_MODEL_ID, is_multilingual, model_encoding, model_spec

    if args.multilingual and args.model not in (None, MULTILINGUAL_MODEL_ID):
        raise UsageError("--multilingual is the model multilingual-e5-small; leave out --model")
    spec = model_spec(MULTILINGUAL_MODEL_ID if args.multilingual else args.model or DEFAULT_MODEL_ID)
    with opened(args) as quire:
        # the preferences' precision and backend are the default model's; a multilingual base has its own
        own = is_multilingual(spec.model_id)
        precision, backend = model_encoding(
            spec.model_id,
            args.precision or ("auto" if own else preferences.get(quire.db, "bases.default_precision")),
            args.backend or ("auto" if own else preferences.get(quire.db, "bases.default_backend")),
        )
        chunk_size = args.chunk_size or preferences.get(quire.db, "bases.default_chunk_size")
        created = bases.create_base(
            quire.db,
            args.name,
            model_id=spec.model_id,
            dimension=spec.dimension,
            precision=precision,
            backend=backend,
            chunk_size=chunk_size,
            chunk_overlap=args.chunk_overlap,
        )
    out.emit(created.as_dict(), _base_text)
    return 0


def _create_remote_base(args: argparse.Namespace, out: Output) -> int:
    from knowledge import preferences

    if not args.endpoint or not args.model:
        raise UsageError("--embedder http needs --endpoint URL and --model NAME")
    settings = CallSettings(
        timeout=args.timeout, max_retries=args.max_retries, rate_per_second=args.rate, max_concurrency=args.concurrency
    )
    # asked before the database is opened for writing: no network call inside a transaction
    config = remote_embedder_config(
        args.endpoint, args.model, dimensions=args.dimensions, api_key_env=args.api_key_env, settings=settings
    )
    with opened(args) as quire:
        created = bases.create_base(
            quire.db,
            args.name,
            model_id=DEFAULT_MODEL_ID,  # the tokenizer chunks are measured with
            dimension=config.dimension,
            precision="fp32",
            chunk_size=args.chunk_size or preferences.get(quire.db, "bases.default_chunk_size"),
            chunk_overlap=args.chunk_overlap,
            embedder=config.as_json(),
        )
        machine_folders.confirm_endpoint_here(quire.db, quire.data_dir, config.as_json())  # a person here chose it
    out.emit(created.as_dict(), _base_text)
    return 0


def cmd_base_list(args: argparse.Namespace, out: Output) -> int:
    limit = limit_of(args)
    with opened(args) as quire:
        found = bases.page_bases(quire.db, limit=limit, after_id=args.after)
    more = next_cursor(found, limit, lambda b: b.id)
    out.emit(
        paged("bases", [b.as_dict() for b in found], more),
        lambda d: with_more("\n".join(_base_text(b) for b in d["bases"]) or "no knowledge bases", more),
    )
    return 0


def cmd_base_show(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        base = bases.get_base(quire.db, args.base)
        data = {**base.as_dict(), "items": bases.base_summary(quire.db, base.id)}
    out.emit(data, lambda d: _base_text(d) + "\n" + _embedder_text(d.get("embedder")) + "\n" + json.dumps(d["items"]))
    return 0


def cmd_base_ocr_language(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        if args.language is None:
            base = bases.get_base(quire.db, args.base)
        else:
            base = lifecycle.set_ocr_language(quire.db, args.base, args.language)
        installed = list(lifecycle.installed_languages())
    out.emit(
        {"base": base.name, "ocr_language": base.ocr_language, "installed": installed},
        lambda d: f"{d['base']}: OCR language {d['ocr_language']} (installed: {', '.join(d['installed'])})",
    )
    return 0


def cmd_base_rename(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        out.emit(bases.rename_base(quire.db, args.base, args.new_name).as_dict(), _base_text)
    return 0


def cmd_base_confirm_endpoint(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        base = bases.confirm_endpoint(quire.db, args.base)
        assert base.embedder is not None
        machine_folders.confirm_endpoint_here(quire.db, quire.data_dir, base.embedder)  # on a team store: for here
    out.emit(base.as_dict(), lambda d: f"{d['name']}: texts will be sent to {d['embedder']['endpoint']}")
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
