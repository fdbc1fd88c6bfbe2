"""The app's job worker: a separate process, started after the window shows, stopped with SIGTERM on close.

Why a process and not a thread: the worker parses and embeds; torch's OpenMP threads in the GUI
process would fight the UI thread and the GIL for two cores (FACTS.md #8), and its import alone costs
seconds and hundreds of MB (FACTS.md #9). The process is ``python -m app.cli --data-dir D worker``
(through ``app.worker_launch``, which makes Linux stop it if the app dies), so the GUI and the CLI run
the very same worker. On a team store the worker learns the store from its environment
(``QUIRE_STORE``/``QUIRE_QUEUE``, ``app.team_store``), never its arguments, which every user of the machine
can read; a window on a data directory takes both out, so its worker never follows a store the window does not.

Threading contract: a ``WorkerProcess`` lives on the main thread; ``QProcess`` reports through its own
signals on the main thread's event loop. Nothing here touches the database: the GUI learns what the
worker did by polling the job and item columns (STYLE.md #4).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal

import knowledge
from app.team_store import WORKER_ENV_KEYS, TeamStore
from app.worker_launch import launcher_argv

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(knowledge.__file__).resolve().parent.parent
MAX_RESTARTS = 3


class WorkerProcess(QObject):
    """Start, watch and stop the worker process of one data directory."""

    state_changed = Signal(str)  # starting | running | stopping | stopped | crashed

    def __init__(self, data_dir: Path, parent: QObject | None = None, *, store: TeamStore | None = None) -> None:
        super().__init__(parent)
        self.data_dir = data_dir
        self.store = store
        self.state = "stopped"
        self._stopping = False
        self._restarts = 0
        self._closed = False
        self.last_exit: tuple[int, str] | None = None  # (exit code, "normal" | "crashed") of the last run
        self._process: QProcess | None = None

    @property
    def pid(self) -> int | None:
        if self._process is None or self._process.state() == QProcess.ProcessState.NotRunning:
            return None
        return int(self._process.processId())

    def is_running(self) -> bool:
        return self.pid is not None

    def start(self) -> None:
        if self._closed or self.is_running():
            return
        self._stopping = False
        process = QProcess(self)
        process.setProcessEnvironment(self._environment())
        process.setWorkingDirectory(str(PROJECT_ROOT))
        # the worker logs into its own rotated, owner-only worker.log (``quire worker --log``); whatever
        # else it prints (a crash's stack) goes where the window's own output goes
        process.setProcessChannelMode(QProcess.ProcessChannelMode.ForwardedChannels)
        process.started.connect(lambda: self._set_state("running"))
        process.finished.connect(self._finished)
        self._process = process
        self._set_state("starting")
        program, *arguments = launcher_argv(os.getpid(), str(self.data_dir))
        process.start(program, arguments)

    def stop(self, grace_ms: int = 8000) -> None:
        """SIGTERM (stop taking jobs), wait ``grace_ms`` for the running job, then kill. Blocks: call on close."""
        self._closed = True
        process = self._process
        if process is None or process.state() == QProcess.ProcessState.NotRunning:
            return
        self._stopping = True
        self._set_state("stopping")
        process.terminate()
        if not process.waitForFinished(grace_ms):
            log.warning("the worker did not stop within %s ms; killing it (recovery decides next start)", grace_ms)
            process.kill()
            process.waitForFinished(3000)
        self._set_state("stopped")

    def _environment(self) -> QProcessEnvironment:
        env = QProcessEnvironment.systemEnvironment()
        path = env.value("PYTHONPATH", "")
        env.insert("PYTHONPATH", str(PROJECT_ROOT) + (os.pathsep + path if path else ""))
        for key, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
            if not env.contains(key):
                env.insert(key, value)
        for key in WORKER_ENV_KEYS:
            env.remove(key)
        for key, value in (self.store.worker_environment() if self.store else {}).items():
            env.insert(key, value)
        return env

    def _finished(self, code: int, status: QProcess.ExitStatus) -> None:
        self.last_exit = (code, "normal" if status == QProcess.ExitStatus.NormalExit else "crashed")
        if self._stopping:
            self._set_state("stopped")
            return
        log.warning("the worker process ended unexpectedly (exit %s)", code)
        self._set_state("crashed")
        if self._restarts < MAX_RESTARTS:
            self._restarts += 1
            QTimer.singleShot(1000 * self._restarts, self.start)

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.state_changed.emit(state)
