"""Run a check as ``nobody``, so a test about permissions means the same as root (CI) and as a user: root
reads any file whatever its mode, so a chmod-000 check would otherwise have to skip there."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

NOBODY = 65534  # the conventional unprivileged uid/gid


def as_nobody(check: Callable[[], Any]) -> Any:
    """``check()``'s JSON-able answer, computed in a forked child that dropped root for ``nobody`` first (the
    caller must be root); a child that raised answers ``{"child failed": repr(exc)}``."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        answer: Any
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            answer = check()
        except BaseException as exc:
            answer = {"child failed": repr(exc)}
        finally:
            try:
                os.write(write_end, json.dumps(answer).encode())
            finally:
                os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        raw = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(raw)


def chown_tree(root: os.PathLike[str] | str, uid: int = NOBODY) -> None:
    """``root`` and everything below it owned by ``uid`` (its group too)."""
    for folder, dirs, files in os.walk(root):
        for name in (folder, *(os.path.join(folder, n) for n in (*dirs, *files))):
            os.lchown(name, uid, uid)
