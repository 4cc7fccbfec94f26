"""Loading the Alibaba GPU trace (cluster-trace-gpu-v2023) and building a run's pod sequence.

Node lists have columns ``sn, cpu_milli, memory_mib, gpu, model``; pod lists have ``name,
cpu_milli, memory_mib, num_gpu, gpu_milli`` and, in most variants, ``gpu_spec`` (accepted card
models joined by ``|``, empty for any) followed by columns a replay ignores (qos, phase, times).
``gpu_milli`` is per card: 1–1000 for a pod on one card, 1000 for a multi-card pod, 0 for a
CPU-only pod. A bad row is an error naming the file, the line and the column.

The workload of one run follows the FGD paper's simulator: pods sorted by name, shuffled with
the run's seed, then resampled with replacement (clones named ``<name>-tuned-<i>``) and
appended until the next sample would pass ``tune`` × the cluster's GPU milli, or, when the
trace already asks for more, random pods dropped until it no longer does. Like the reference
simulator, the "would pass" test of a resample adds the sample's per-card milli (not its
total), so a run can end up to seven cards above the line when the last sample is a
multi-card pod; keeping that keeps our runs comparable with the published curves.
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduler.devices.placement.state import MILLI, PodShape

__all__ = [
    "NODE_COLUMNS",
    "POD_COLUMNS",
    "TraceError",
    "TraceNode",
    "TracePod",
    "Workload",
    "generate_workload",
    "load_nodes",
    "load_pods",
    "resolve_trace",
    "trace_name",
]

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
POD_LIST_PREFIX = "openb_pod_list_"


class TraceError(ValueError):
    """A trace file that cannot be used; names the file, line and column when known."""

    def __init__(self, path: Path, message: str, *, line: int = 0, column: str = "") -> None:
        where = str(path)
        if line:
            where += f":{line}"
        if column:
            where += f" column {column!r}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.column = column


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: frozenset[str] = frozenset()
    spec_text: str = ""
    """``gpu_spec`` as written; the FGD target workload orders shapes by it."""

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def shape(self) -> PodShape:
        return PodShape(
            cpu_milli=self.cpu_milli,
            memory_mib=self.memory_mib,
            num_gpu=self.num_gpu,
            gpu_milli=self.gpu_milli,
            gpu_spec=self.gpu_spec,
        )

    def renamed(self, name: str) -> TracePod:
        return TracePod(
            name, self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli,
            self.gpu_spec, self.spec_text,
        )


def _rows(path: Path, required: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) of a CSV file whose header has every ``required`` column."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise TraceError(path, f"cannot read: {err.strerror or err}") from err
    try:
        # utf-8-sig: a CSV saved by a spreadsheet starts with a byte order mark
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise TraceError(path, f"not UTF-8 text (byte 0x{data[err.start]:02x} at offset "
                               f"{err.start}); a trace is a CSV file", line=line) from None
    if "\0" in text:
        raise TraceError(path, "holds NUL bytes: a binary file, not a CSV trace",
                         line=text.count("\n", 0, text.index("\0")) + 1)
    # newline="" semantics: the csv module splits CRLF and LF lines itself
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceError(path, f"header lacks column(s) {', '.join(missing)}", line=1)
    for row in reader:
        if None in row or any(v is None for v in row.values()):
            raise TraceError(path, "wrong number of fields", line=reader.line_num)
        yield reader.line_num, row


def _int(path: Path, line: int, row: dict[str, str], column: str, *, low: int = 0) -> int:
    text = row[column].strip()
    try:
        value = int(text)
    except ValueError:
        raise TraceError(path, f"{text!r} is not an integer", line=line, column=column) from None
    if value < low:
        raise TraceError(path, f"{value} is below {low}", line=line, column=column)
    return value


def load_nodes(path: Path, *, gpu_only: bool = True) -> list[TraceNode]:
    """Nodes of a node-list CSV, in file order; with ``gpu_only`` the nodes without cards go."""
    nodes: list[TraceNode] = []
    seen: set[str] = set()
    for line, row in _rows(path, NODE_COLUMNS):
        name = row["sn"].strip()
        if not name:
            raise TraceError(path, "empty node name", line=line, column="sn")
        if name in seen:
            raise TraceError(path, f"node {name!r} listed twice", line=line, column="sn")
        seen.add(name)
        gpus = _int(path, line, row, "gpu")
        model = row["model"].strip()
        if model.lower() == "nan":
            model = ""
        if gpus and not model:
            raise TraceError(path, f"node {name!r} has {gpus} GPU(s) but no model",
                             line=line, column="model")
        node = TraceNode(
            name=name,
            cpu_milli=_int(path, line, row, "cpu_milli"),
            memory_mib=_int(path, line, row, "memory_mib"),
            gpus=gpus,
            model=model,
        )
        if gpus or not gpu_only:
            nodes.append(node)
    if not nodes:
        raise TraceError(path, "no usable nodes")
    return nodes


def load_pods(path: Path) -> list[TracePod]:
    """Pods of a pod-list CSV, in file order, with their requests checked."""
    pods: list[TracePod] = []
    seen: set[str] = set()
    for line, row in _rows(path, POD_COLUMNS):
        name = row["name"].strip()
        if not name:
            raise TraceError(path, "empty pod name", line=line, column="name")
        if name in seen:
            raise TraceError(path, f"pod {name!r} listed twice", line=line, column="name")
        seen.add(name)
        num_gpu = _int(path, line, row, "num_gpu")
        gpu_milli = _int(path, line, row, "gpu_milli")
        if gpu_milli > MILLI:
            raise TraceError(path, f"{gpu_milli} is above {MILLI} milli of one card",
                             line=line, column="gpu_milli")
        if num_gpu == 0 and gpu_milli:
            raise TraceError(path, "a pod without GPUs asks for GPU milli",
                             line=line, column="gpu_milli")
        if num_gpu and not gpu_milli:
            raise TraceError(path, f"{num_gpu} GPU(s) of 0 milli", line=line, column="gpu_milli")
        if num_gpu > 1 and gpu_milli != MILLI:
            raise TraceError(path, "a multi-GPU pod must ask for whole cards (1000 milli)",
                             line=line, column="gpu_milli")
        spec_text = (row.get("gpu_spec") or "").strip()
        if spec_text.lower() == "nan":
            spec_text = ""
        spec = frozenset(m.strip() for m in spec_text.split("|") if m.strip())
        if spec and not num_gpu:
            raise TraceError(path, "a pod without GPUs names GPU models",
                             line=line, column="gpu_spec")
        pods.append(TracePod(
            name=name,
            cpu_milli=_int(path, line, row, "cpu_milli"),
            memory_mib=_int(path, line, row, "memory_mib"),
            num_gpu=num_gpu,
            gpu_milli=gpu_milli,
            gpu_spec=spec,
            spec_text=spec_text,
        ))
    if not pods:
        raise TraceError(path, "no pods")
    return pods


def resolve_trace(name_or_path: str, *, traces_dir: Path) -> Path:
    """A pod-list CSV from a trace name (``default``, ``cpu050``…) or a path to a CSV."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".csv" or candidate.exists():
        if not candidate.is_file():
            raise TraceError(candidate, "no such pod-list file")
        return candidate
    path = traces_dir / f"{POD_LIST_PREFIX}{name_or_path}.csv"
    if not traces_dir.is_dir():
        raise TraceError(traces_dir, f"no such folder (trace {name_or_path!r} is looked up "
                                     f"there; give --traces-dir, relative paths start at "
                                     f"the current directory)")
    if not path.is_file():
        known = sorted(p.stem.removeprefix(POD_LIST_PREFIX)
                       for p in traces_dir.glob(f"{POD_LIST_PREFIX}*.csv"))
        raise TraceError(path, f"no trace named {name_or_path!r}; known: {', '.join(known)}")
    return path


def trace_name(path: Path) -> str:
    """``default`` for ``openb_pod_list_default.csv``; the file stem for any other CSV."""
    return path.stem.removeprefix(POD_LIST_PREFIX)


@dataclass(frozen=True, slots=True)
class Workload:
    """The pods of one run in submission order, and the trace they were drawn from."""

    pods: list[TracePod]
    original: list[TracePod]
    """The trace's own pods (before tuning): the FGD target workload is built from these."""
    target_gpu_milli: float

    @property
    def total_gpu_milli(self) -> int:
        return sum(p.total_gpu_milli for p in self.pods)


def generate_workload(
    pods: Sequence[TracePod], *, capacity_gpu_milli: int, tune: float, rng: random.Random
) -> Workload:
    """The pod sequence of one run: sorted by name, shuffled, then tuned to ``tune`` × capacity.

    ``tune <= 0`` keeps the shuffled trace as it is.
    """
    if not pods:
        raise ValueError("no pods to build a workload from")
    ordered = sorted(pods, key=lambda p: p.name)
    sequence = list(ordered)
    rng.shuffle(sequence)
    target = tune * capacity_gpu_milli
    total = sum(p.total_gpu_milli for p in sequence)
    if tune > 0 and total == 0:
        raise ValueError("the trace asks for no GPU, so it cannot be tuned to a GPU load")
    if tune <= 0 or total == target:
        return Workload(sequence, ordered, target)
    if total > target:
        while total > target:
            removed = sequence.pop(rng.randrange(len(sequence)))
            total -= removed.total_gpu_milli
        return Workload(sequence, ordered, target)
    clone = 0
    while True:
        sample = ordered[rng.randrange(len(ordered))]
        if total + sample.gpu_milli > target:
            break
        sequence.append(sample.renamed(f"{sample.name}-tuned-{clone}"))
        total += sample.total_gpu_milli
        clone += 1
    return Workload(sequence, ordered, target)
