"""A real worker process on a team store: ``python -m tests.support.team_worker STORE_URL QUEUE_URL LOCAL_DIR``.

It goes through the same start-up as ``quire worker``: open (the store, the Redis transport), recover, run
until idle. The URLs come from the test's own loopback servers.
"""

from __future__ import annotations

import sys
from pathlib import Path

from knowledge.compose import open_team_quire


def main() -> int:
    url, queue_url, local = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    quire = open_team_quire(url, data_dir=local, queue_url=queue_url, hosts_worker=True)
    quire.recover()
    done = quire.make_worker(lease_seconds=10.0, poll_interval=0.05).run(until_idle=True, timeout=240)
    print(f"finished {done}", flush=True)
    quire.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
