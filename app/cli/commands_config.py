"""``quire config get KEY | set KEY VALUE | list``.

It reads and writes through ``knowledge.preferences`` — the same typed keys, defaults and validation
the Preferences dialog uses — so a value set in one is what the other shows. A bad value exits 2.
"""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.base import Output
from app.cli.commands_core import opened
from knowledge import preferences


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("config", parents=[common], help="read and change preferences")
    actions = p.add_subparsers(dest="config_action", metavar="ACTION")
    actions.required = True
    g = actions.add_parser("get", parents=[common], help="print one preference")
    g.add_argument("key", choices=list(preferences.PREFERENCES), metavar="KEY")
    g.set_defaults(func=cmd_config_get)
    s = actions.add_parser("set", parents=[common], help="validate and store one preference")
    s.add_argument("key", choices=list(preferences.PREFERENCES), metavar="KEY")
    s.add_argument("value", help="the new value (ignore patterns: one per line)")
    s.set_defaults(func=cmd_config_set)
    ls = actions.add_parser("list", parents=[common], help="every preference, its value and default")
    ls.set_defaults(func=cmd_config_list)


def _entry(key: str, value: Any) -> dict[str, Any]:
    pref = preferences.PREFERENCES[key]
    return {"key": key, "value": value, "default": pref.default, "label": pref.label, "applies": pref.applies}


def cmd_config_get(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        value = preferences.get(quire.db, args.key)
    out.emit(_entry(args.key, value), lambda d: preferences.PREFERENCES[d["key"]].show(d["value"]))
    return 0


def cmd_config_set(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        value = preferences.set_value(quire.db, args.key, args.value)
    entry = _entry(args.key, value)
    note = "" if entry["applies"] == "at once" else f" (applies {entry['applies']})"
    out.emit(entry, lambda d: f"{d['key']} = {preferences.PREFERENCES[d['key']].show(d['value'])!r}{note}")
    return 0


def cmd_config_list(args: argparse.Namespace, out: Output) -> int:
    with opened(args) as quire:
        values = preferences.list_values(quire.db)
    rows = [_entry(key, value) for key, value in values.items()]
    out.emit(
        {"preferences": rows},
        lambda d: "\n".join(
            f"{r['key']:<30} {preferences.PREFERENCES[r['key']].show(r['value'])!r}" for r in d["preferences"]
        ),
    )
    return 0
