"""The watcher: filesystem events are hints that schedule a reconcile; it never writes an item.

Run by the worker process in one thread (:class:`SyncWatcher`). It watches every synced root that can be
watched with ``watchfiles`` (Rust ``notify``; inotify on Linux: content and metadata changes, creates,
deletes and moves — never reads, so Quire reading a file for indexing does not re-trigger it) and, on
events, marks the affected root dirty and enqueues its ``knowledge.sync-root`` job under the root's
idempotency key, so a burst coalesces into one pending job. A root on a network or FUSE mount, or every
root when the watcher cannot start (e.g. the inotify watch limit is reached), falls back to polling: a
reconcile every ``sync.poll_seconds``; its status says so, with the reason. Every root also gets a full
reconcile every ``sync.full_reconcile_seconds`` (events can be missed).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.outage import Link, is_link_error, outage_budget
from knowledge.library import tree
from knowledge.store import machine_folders
from knowledge.sync.roots import (
    FULL_RECONCILE_SECONDS,
    POLL_SECONDS,
    SyncRoot,
    kept_here,
    list_roots,
    request_reconcile,
    set_watcher_state,
    setting,
)

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)

# File system types inotify cannot see changes on (changes made by other machines, or by a FUSE daemon).
UNWATCHABLE_FS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "davfs", "sshfs", "virtiofs"}
)
REFRESH_SECONDS = 1.0  # how often the watch loop looks for roots turned on or off (and its first yield)


def fs_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The file system type of the mount holding ``path`` (Linux ``/proc/self/mountinfo``), or None."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    real = os.path.realpath(path)
    best, best_type = "", None
    for line in mountinfo.splitlines():
        left, _sep, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mount_point = fields[4].replace("\\040", " ")
        inside = real == mount_point or real.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, best_type = mount_point, right.split()[0]
    return best_type


def polling_reason(path: Path, mountinfo: str | None = None) -> str | None:
    """Why a folder cannot be watched (it is then polled), or None when it can."""
    kind = fs_type(path, mountinfo)
    if kind is None:
        return None
    if kind in UNWATCHABLE_FS or kind.startswith("fuse"):
        return f"network or FUSE mount ({kind}): changes are found by polling"
    return None


class SyncWatcher:
    """One thread per worker process: watch what can be watched, poll the rest, full reconcile on a timer."""

    def __init__(self, quire: Quire) -> None:
        self.quire = quire
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_full: dict[int, float] = {}
        self.watch_failed: str | None = None  # set when the watcher could not start (e.g. watch limit)
        self._store = Link("store, for the folder watcher", outage_budget())

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="quire-sync-watcher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the loop ------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                watched = self._plan()
                if watched and self.watch_failed is None:
                    self._watch(watched)
                else:
                    self._stop.wait(REFRESH_SECONDS)
                self._timers()
            except Exception as exc:  # the watcher is a hint source: log and go on (the timers still run)
                if is_link_error(exc):  # the store restarts: wait it out, logged once per outage
                    self._stop.wait(self._store.failed(exc))
                    continue
                log.exception("sync watcher loop failed")
                self._stop.wait(REFRESH_SECONDS)
            else:
                self._store.restored()

    def _folders(self) -> dict[int, Path]:
        out: dict[int, Path] = {}
        roots = self._roots()
        with self.quire.db.read() as conn:
            for root in roots:
                item = tree.load_item(conn, root.item_id)
                if item is None or not item.source_path or item.status == "deleting":
                    continue
                if machine_folders.may_read(self.quire.db, self.quire.data_dir, item.source_path):
                    out[root.id] = Path(item.source_path)
        return out

    def _roots(self) -> list[SyncRoot]:
        """The roots this machine keeps in sync: another machine's folder is never watched or scanned here."""
        return [r for r in list_roots(self.quire.db) if kept_here(self.quire.db, r)]

    def _plan(self) -> dict[int, Path]:
        """Decide per root: watched or polled (with the reason); record it for the status."""
        folders = self._folders()
        roots = {r.id: r for r in self._roots()}
        watched: dict[int, Path] = {}
        for root_id, folder in folders.items():
            reason = self.watch_failed or polling_reason(folder)
            if reason is None and not folder.is_dir():
                reason = "the folder cannot be found"
            root = roots.get(root_id)
            if reason is None:
                watched[root_id] = folder  # "watching" once the watch is up (see _watch)
            elif root is not None and (root.watcher_state, root.watcher_reason) != ("polling", reason):
                set_watcher_state(self.quire.db, [root_id], "polling", reason)
        return watched

    def _watch(self, watched: dict[int, Path]) -> None:
        import watchfiles

        started = time.monotonic()
        ready = False
        try:
            for changes in watchfiles.watch(
                *watched.values(),
                stop_event=self._stop,
                debounce=200,
                step=20,
                rust_timeout=int(REFRESH_SECONDS * 1000),
                yield_on_timeout=True,
                raise_interrupt=False,
                ignore_permission_denied=True,
            ):
                if not ready:
                    # The watch is up now (its first yield). What changed before it was up is found by
                    # one reconcile of every watched root: events are hints, the scan is the truth.
                    ready = True
                    set_watcher_state(self.quire.db, list(watched), "watching", None)
                    for root_id in watched:
                        request_reconcile(self.quire, root_id)
                if changes:
                    self._hint(watched, {Path(p) for _kind, p in changes})
                self._timers()
                if time.monotonic() - started > REFRESH_SECONDS and self._folders() != watched:
                    return  # roots turned on or off: watch the new set
        except (OSError, RuntimeError) as exc:  # e.g. "OS file watch limit reached"
            log.warning("cannot watch synced folders, polling instead: %s", exc)
            self.watch_failed = "the file watcher could not start (watch limit reached?): changes are found by polling"
            set_watcher_state(self.quire.db, list(watched), "polling", self.watch_failed)

    def _hint(self, watched: dict[int, Path], paths: set[Path]) -> None:
        data = os.path.realpath(self.quire.data_dir)
        for root_id, folder in watched.items():
            prefix = str(folder).rstrip("/") + "/"
            hit = any(
                (str(p) == str(folder) or str(p).startswith(prefix)) and not str(p).startswith(data) for p in paths
            )
            if hit:
                request_reconcile(self.quire, root_id)

    def _timers(self) -> None:
        """Polled roots every ``sync.poll_seconds``; every root every ``sync.full_reconcile_seconds``."""
        now = time.monotonic()
        full = setting(self.quire.db, FULL_RECONCILE_SECONDS)
        poll = setting(self.quire.db, POLL_SECONDS)
        for root in self._roots():
            every = poll if root.watcher_state == "polling" else full
            last = self._last_full.setdefault(root.id, now)
            if now - last >= every:
                self._last_full[root.id] = now
                request_reconcile(self.quire, root.id, tag="timer")


def describe(root: SyncRoot) -> str:
    """One line for people: the state, pending changes, when it last synced, why it polls."""
    where = f" on {root.host}" if root.host else ""
    parts = [f"not watched (no worker running{where})" if root.state == "off" else root.state]
    if root.pending_count:
        parts.append(f"{root.pending_count} change(s) pending review")
    if root.last_synced_at:
        parts.append("last synced " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(root.last_synced_at)))
    else:
        parts.append("not synced yet")
    if root.waiting_for:
        parts.append(f"waiting: {root.waiting_for}")
    if root.watcher_state == "polling" and root.watcher_reason:
        parts.append(root.watcher_reason)
    return "; ".join(parts)
