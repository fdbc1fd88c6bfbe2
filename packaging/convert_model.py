"""Build step of ``make package`` (run by packaging/quire.spec): the packaged model, ready for an app without torch.

    python packaging/convert_model.py build/quire-model

Writes, under the folder given:

* ``openvino/<ir name>/model.xml`` (+ ``model.bin``): the model's transformer converted to OpenVINO IR with
  torch, here on the build machine, and checked against torch's own output on probe texts (the check every
  first conversion on a development install makes: pooled cosine >= ``MATCH_COSINE``), so the frozen app
  loads it and never converts (the bundle ships no torch);
* ``model/quire-weights.json``: the digest of the weight files the IR was made from; the bundle ships the
  model's directory without its weights (the IR holds them), and the app's material stamps stay those of a
  development install with the same model (``knowledge.ingest.weights.weights_digest``).

Run in its own process so the build's analysis never has torch imported; prints one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    from knowledge.ingest.embedding import default_model_spec
    from knowledge.ingest.openvino_backend import IR_NAME, convert_into
    from knowledge.ingest.weights import WEIGHTS_MANIFEST, weights_manifest

    spec = default_model_spec()
    started = time.monotonic()
    ir, cosine = convert_into(args.folder / "openvino", spec)  # raises if the conversion does not match torch
    manifest = args.folder / "model" / WEIGHTS_MANIFEST
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(weights_manifest(spec), encoding="utf-8")
    size = sum(f.stat().st_size for f in ir.iterdir())
    seconds = round(time.monotonic() - started, 1)
    print(json.dumps({"ir": ir.name, "xml": IR_NAME, "bytes": size, "cosine_to_torch": cosine, "seconds": seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
