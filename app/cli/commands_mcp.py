"""Agent commands: ``mcp`` (serve the bases to AI agents), ``proposals list|accept|dismiss`` and ``agents
exclude|include BASE ITEM|PATH`` (keep an item, a folder with all inside it, from agents; a person's).

``quire mcp`` serves over stdio (what Claude Desktop and editors launch) or, with ``--http PORT``, over
Streamable HTTP on 127.0.0.1 with the data directory's bearer token. It refuses (exit 5) while agent
access is off for the data directory; ``--enable`` / ``--disable`` switch it (a person only, like the
window's Agent access page). ``--print-config`` is the only command that prints the token.
``--allow-root PATH`` / ``--disallow-root PATH`` change the folders agents may propose runs over (a person
only; none by default) and ``--status`` shows the setting and that list.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from app.cli.base import Output, UsageError, local_only
from app.cli.commands_core import opened, principal_of
from app.cli.paging import add_paging, limit_of, next_cursor, paged, with_more
from app.self_command import quire_command
from knowledge.agents import access, proposals
from knowledge.errors import Forbidden
from knowledge.library import agent_exclusions


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("mcp", parents=[common], help="serve the knowledge bases to AI agents (MCP)")
    p.add_argument("--agent", help="the agent name every call is recorded under (default: the client's name)")
    p.add_argument("--http", type=int, metavar="PORT", help="Streamable HTTP on 127.0.0.1:PORT (token required)")
    p.add_argument("--print-config", action="store_true", help="print the client configuration (with the token)")
    switch = p.add_mutually_exclusive_group()
    switch.add_argument("--enable", action="store_true", help="turn agent access on for this data directory")
    switch.add_argument("--disable", action="store_true", help="turn agent access off")
    p.add_argument("--revoke-token", action="store_true", help="replace the HTTP token (old clients are refused)")
    p.add_argument(
        "--allow-root",
        action="append",
        default=[],
        metavar="PATH",
        help="let agents propose folder runs inside PATH (repeatable; none are allowed by default)",
    )
    p.add_argument(
        "--disallow-root", action="append", default=[], metavar="PATH", help="take PATH off the allowed folders"
    )
    p.add_argument("--status", action="store_true", help="show whether agent access is on and the allowed folders")
    p.set_defaults(func=cmd_mcp)

    prop = sub.add_parser("proposals", parents=[common], help="agents' proposals: list, accept, dismiss")
    psub = prop.add_subparsers(dest="proposals_command", metavar="ACTION", parser_class=type(prop))
    psub.required = True
    q = psub.add_parser("list", parents=[common], help="pending proposals (--all: every proposal)")
    q.add_argument("--all", action="store_true")
    add_paging(q, most=1000)  # newest first: the next page holds older proposals
    q.set_defaults(func=cmd_proposals_list)
    for action, fn in (("accept", cmd_proposals_accept), ("dismiss", cmd_proposals_dismiss)):
        q = psub.add_parser(action, parents=[common], help=f"{action} a pending proposal")
        q.add_argument("proposal", type=int)
        q.set_defaults(func=fn)

    group = sub.add_parser("agents", parents=[common], help="keep items from agents, or let agents see them again")
    asub = group.add_subparsers(dest="agents_command", metavar="ACTION", parser_class=type(group))
    asub.required = True
    for action, what in (
        ("exclude", "keep an item (a folder: all inside it) from agents"),
        ("include", "let agents see it again"),
    ):
        q = asub.add_parser(action, parents=[common], help=what)
        q.add_argument("base")
        q.add_argument("item", metavar="ITEM|PATH", help="the item's id, its original's path or its path in the base")
        q.set_defaults(func=cmd_agents_mark, excluded=action == "exclude")


def cmd_mcp(args: argparse.Namespace, out: Output) -> int:
    if args.http is not None and not 1 <= args.http <= 65535:
        raise UsageError("--http takes a port between 1 and 65535")
    with opened(args) as quire:
        if args.enable or args.disable:
            on = access.set_enabled(quire, principal_of(args, quire), bool(args.enable))
            out.emit({"enabled": on}, f"agent access is {'on' if on else 'off'} for {quire.data_dir}")
        if args.revoke_token:
            access.revoke_token(quire, principal_of(args, quire))
            out.emit({"revoked": True}, "token replaced; clients using the old one are refused")
        changes_roots = bool(args.allow_root or args.disallow_root)
        for path in args.allow_root:
            access.allow_root(quire, principal_of(args, quire), path)
        for path in args.disallow_root:
            access.disallow_root(quire, principal_of(args, quire), path)
        if changes_roots or args.status:
            roots = [str(r) for r in access.allowed_roots(quire)]
            out.emit({"enabled": access.is_enabled(quire), "allowed_roots": roots}, _status_text)
        if args.print_config:
            local_only(args, "--print-config", "let the client run `quire --store URL mcp` (no password in a config)")
            data_dir = Path(args.data_dir)
            command = quire_command("--data-dir", str(data_dir), "mcp")
            config = access.client_config(
                data_dir, command, port=args.http or access.DEFAULT_HTTP_PORT, agent=args.agent
            )
            out.emit({**config, "enabled": access.is_enabled(quire)}, lambda d: json.dumps(d, indent=2))
        if args.enable or args.disable or args.revoke_token or args.print_config or changes_roots or args.status:
            return 0
        if not access.is_enabled(quire):
            raise Forbidden(
                "agent access is off for this data directory; turn it on in the window (Agent access) "
                "or with `quire mcp --enable`"
            )
        from knowledge.agents import server

        if args.http is not None:
            server.serve_http(quire, args.http, agent=args.agent)
        else:
            server.QuireMCP(quire, agent=args.agent, require_enabled=True).server.run("stdio")
    return 0


def _status_text(d: dict[str, Any]) -> str:
    roots = d["allowed_roots"]
    listed = "\n".join(f"  {r}" for r in roots) if roots else "  none (agents cannot propose folder runs)"
    return f"agent access is {'on' if d['enabled'] else 'off'}\nfolders agents may propose:\n{listed}"


def _proposal_line(p: dict[str, Any]) -> str:
    what = p["folder"] or p["note_title"]
    return f"{p['id']:>5} {p['status']:<9} {p['kind']:<10} {p['proposed_by']:<24} {p['base_name']}  {what}"


def cmd_proposals_list(args: argparse.Namespace, out: Output) -> int:
    limit = limit_of(args)
    status = None if args.all else "pending"
    with opened(args) as quire:
        found = proposals.list_proposals(quire, status=status, limit=limit, before_id=args.after or None)
    more = next_cursor(found, limit, lambda p: p.id)
    out.emit(
        paged("proposals", [p.as_dict() for p in found], more),
        lambda d: with_more("\n".join(_proposal_line(p) for p in d["proposals"]) or "no proposals", more),
    )
    return 0


def cmd_proposals_accept(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        decision = proposals.accept_proposal(quire, principal_of(args, quire), args.proposal)
    out.emit(decision.as_dict(), lambda d: f"proposal {args.proposal} accepted; `quire worker` does the work")
    return 0


def cmd_proposals_dismiss(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        proposals.dismiss_proposal(quire, principal_of(args, quire), args.proposal)
    out.emit({"proposal": args.proposal, "status": "dismissed"}, f"proposal {args.proposal} dismissed")
    return 0


def cmd_agents_mark(args: argparse.Namespace, out: Output) -> int:
    """``quire agents exclude|include BASE ITEM|PATH`` (a person's: an agent is refused)."""
    mark = agent_exclusions.exclude_from_agents if args.excluded else agent_exclusions.include_for_agents
    with opened(args) as quire:
        changed = mark(quire, args.base, args.item)
    state = "kept from agents" if args.excluded else "visible to agents"
    out.emit({"item": args.item, "kept_from_agents": args.excluded, "changed": changed}, f"{args.item}: {state}")
    return 0
