"""Where a replay's input files come from: the sample shipped with Lahar, or a traces folder.

The trace (Alibaba's ``cluster-trace-gpu-v2023``) and the FGD paper's published results are
public but not shipped; a user fetches them and names the folder. The folder is, the first of
these that is set: ``--traces-dir``, the environment variable ``LAHAR_TRACES_DIR``, or
``../shared/traces`` (relative to the current directory). Inside it the pod and node lists are
looked for in ``alibaba-gpu-v2023/``, then ``cluster-trace-gpu-v2023/csv/`` and ``csv/`` (the
layout of a clone of ``alibaba/clusterdata`` and of its folder), then the folder itself; the
paper's results in ``fgd-results/``.

The trace named ``sample`` needs none of that: a few hundred pods of ``default`` and the node
list they are replayed on ship in ``scheduler/replay/data/`` (``NOTICE.md`` there says what
was kept). A trace that cannot be found is a :class:`MissingTraceData` whose message says each
place that was looked at, in order, and how to get the data.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from scheduler.replay.trace import POD_LIST_PREFIX, TraceError

__all__ = [
    "DEFAULT_TRACES",
    "NODE_LIST",
    "PAPER_RESULTS",
    "SAMPLE",
    "SAMPLE_NODES",
    "SAMPLE_PODS",
    "TRACES_ENV",
    "MissingTraceData",
    "TraceSources",
    "find_sources",
]

SAMPLE = "sample"
SAMPLE_DIR = Path(__file__).with_name("data")
SAMPLE_PODS = SAMPLE_DIR / f"{POD_LIST_PREFIX}{SAMPLE}.csv"
SAMPLE_NODES = SAMPLE_DIR / "openb_node_list_sample.csv"
TRACES_ENV = "LAHAR_TRACES_DIR"
DEFAULT_TRACES = Path("..") / "shared" / "traces"
NODE_LIST = "openb_node_list_gpu_node.csv"
PAPER_RESULTS = Path("fgd-results") / "analysis_allo_discrete.csv"
TRACE_FOLDERS = ("alibaba-gpu-v2023", "cluster-trace-gpu-v2023/csv", "csv", ".")
"""Where the CSVs may sit inside a traces folder, in the order they are looked for."""

HOW_TO_GET = (
    "The trace is public: clone https://github.com/alibaba/clusterdata (or download its\n"
    "folder cluster-trace-gpu-v2023) and pass --traces-dir PATH (the clone, that folder or\n"
    f"its csv/) or set {TRACES_ENV}=PATH. `--trace {SAMPLE}` runs without it, on the sample\n"
    "shipped with Lahar. See docs/replay.md, section Data."
)


class MissingTraceData(ValueError):
    """A named trace or the node list is not in the traces folder; the message lists each
    place looked at, in order, and how to get the data."""

    def __init__(self, what: str, looked: list[str]) -> None:
        lines = [f"{what} not found; looked, in order:"]
        lines += [f"  {i}. {place}" for i, place in enumerate(looked, start=1)]
        super().__init__("\n".join([*lines, HOW_TO_GET]))


@dataclass(frozen=True, slots=True)
class TraceSources:
    """The traces folder chosen for a run and how it was chosen."""

    root: Path
    origin: str
    """``--traces-dir``, ``$LAHAR_TRACES_DIR`` or ``default``."""
    skipped: tuple[str, ...] = ()
    """The sources before it that were not set, for the error message."""

    @property
    def csv_folder(self) -> Path | None:
        """The first folder of :data:`TRACE_FOLDERS` holding a pod or node list."""
        for name in TRACE_FOLDERS:
            folder = self.root / name
            if folder.is_dir() and any(folder.glob("openb_*_list_*.csv")):
                return folder
        return None

    @property
    def paper_results(self) -> Path | None:
        path = self.root / PAPER_RESULTS
        return path if path.is_file() else None

    def known_traces(self) -> list[str]:
        """The trace names of the traces folder (``sample`` is always known besides)."""
        folder = self.csv_folder
        if folder is None:
            return []
        return sorted(p.stem.removeprefix(POD_LIST_PREFIX)
                      for p in folder.glob(f"{POD_LIST_PREFIX}*.csv"))

    def pod_list(self, name_or_path: str) -> Path:
        """The pod-list CSV of a trace name (``sample``, ``default``, ``cpu050``…) or a path."""
        if name_or_path == SAMPLE:
            return SAMPLE_PODS
        candidate = Path(name_or_path)
        if candidate.suffix == ".csv" or candidate.exists():
            if not candidate.is_file():
                raise TraceError(candidate, "no such pod-list file")
            return candidate
        return self._find(f"{POD_LIST_PREFIX}{name_or_path}.csv",
                          what=f"trace {name_or_path!r}")

    def node_list(self, pods_csv: Path) -> Path:
        """The node list a pod list is replayed on when ``--nodes`` is not given."""
        if pods_csv == SAMPLE_PODS:
            return SAMPLE_NODES
        return self._find(NODE_LIST, what=f"node list {NODE_LIST} (or give --nodes CSV)")

    def _find(self, filename: str, *, what: str) -> Path:
        folder = self.csv_folder
        if folder is not None and (folder / filename).is_file():
            return folder / filename
        raise MissingTraceData(what, [*self.skipped, self._looked(filename, folder)])

    def _looked(self, filename: str, folder: Path | None) -> str:
        shown = f"{self.root} ({self.origin}"
        if not self.root.is_absolute():
            shown += f", here {self.root.resolve()}"
        shown += ")"
        if not self.root.is_dir():
            return f"{shown}: no such folder"
        if folder is None:
            places = ", ".join(f"{n}/" for n in TRACE_FOLDERS if n != ".")
            return f"{shown}: no openb_*.csv in {places} or the folder itself"
        known = ", ".join(self.known_traces())
        return f"{shown}: no {folder / filename} (traces there: {known})"


def find_sources(flag: str | None, environ: Mapping[str, str] | None = None) -> TraceSources:
    """The traces folder: ``--traces-dir``, else ``$LAHAR_TRACES_DIR``, else the default."""
    env = os.environ if environ is None else environ
    if flag:
        return TraceSources(Path(flag).expanduser(), "--traces-dir")
    skipped = ("--traces-dir: not given",)
    if env.get(TRACES_ENV):
        return TraceSources(Path(env[TRACES_ENV]).expanduser(), f"${TRACES_ENV}", skipped)
    return TraceSources(DEFAULT_TRACES, "default",
                        (*skipped, f"${TRACES_ENV}: not set"))
