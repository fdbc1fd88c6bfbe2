"""A real worker process with the test job types: ``python -m tests.support.worker_proc DATA_DIR [--until-idle]``.

It goes through the same start-up as ``quire worker``: open, recover, run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from knowledge.compose import open_quire
from tests.support import jobtypes


def main() -> int:
    data_dir = Path(sys.argv[1])
    until_idle = "--until-idle" in sys.argv
    recover_only = "--recover-only" in sys.argv
    quire = open_quire(data_dir, hosts_worker=True)
    jobtypes.register(quire)
    report = quire.recover()
    print(json.dumps({"recovery": report.as_dict(), "cancelled": report.cancelled}), flush=True)
    if recover_only:
        return 0
    worker = quire.make_worker(lease_seconds=5.0, poll_interval=0.05)
    worker.run(until_idle=until_idle, timeout=120)
    quire.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
