#!/usr/bin/env python
"""Makes the trace sample shipped in scheduler/replay/data/ from the full trace, byte for byte.

`lahar replay --trace sample` replays it without the full trace. Kept from Alibaba's
cluster-trace-gpu-v2023 (see scheduler/replay/data/NOTICE.md): the header and every 20th row,
the first row included, of `openb_pod_list_default.csv` (408 of 8,152 pods) and of
`openb_node_list_gpu_node.csv` (61 of 1,213 nodes, 314 of 6,212 cards), each row copied
unchanged. Taking rows at a fixed step keeps the trace's mix of CPU-only, sharing, one-card and
multi-card pods and of node types, and the sample asks for about the cluster's GPU, as the
full trace does.

    hack/make_replay_sample.py [--traces-dir DIR] [--check]

The traces folder is found as `lahar replay` finds it (--traces-dir, $LAHAR_TRACES_DIR,
../shared/traces). With --check nothing is written: the exit status is 1 when the shipped files
differ from what the full trace gives.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.replay.sources import (  # noqa: E402
    NODE_LIST,
    SAMPLE_NODES,
    SAMPLE_PODS,
    MissingTraceData,
    find_sources,
)

STEP = 20
POD_LIST = "openb_pod_list_default.csv"


def every_nth_row(text: bytes, step: int = STEP) -> bytes:
    """The header line and data rows 0, step, 2·step, … of a CSV file, bytes unchanged."""
    header, *rows = text.splitlines(keepends=True)
    return header + b"".join(rows[::step])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces-dir", help="folder holding the full trace")
    parser.add_argument("--check", action="store_true",
                        help="compare with the shipped sample instead of writing it")
    args = parser.parse_args(argv)
    sources = find_sources(args.traces_dir)
    try:
        pairs = [(sources.pod_list("default"), SAMPLE_PODS),
                 (sources.node_list(sources.pod_list("default")), SAMPLE_NODES)]
    except MissingTraceData as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    assert pairs[0][0].name == POD_LIST and pairs[1][0].name == NODE_LIST
    differ = 0
    for source, target in pairs:
        data = source.read_bytes()
        sample = every_nth_row(data)
        rows = len(sample.splitlines()) - 1
        print(f"{source} (sha256 {hashlib.sha256(data).hexdigest()[:16]}…): "
              f"{rows} rows -> {target.relative_to(ROOT)}")
        if args.check:
            if not target.is_file() or target.read_bytes() != sample:
                print(f"differs: {target}", file=sys.stderr)
                differ += 1
        else:
            target.write_bytes(sample)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
