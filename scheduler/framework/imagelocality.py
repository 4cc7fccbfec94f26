"""Image locality: kube-scheduler's ImageLocality score from the images nodes already hold.

A node reports its images in ``status.images`` (``names`` and ``sizeBytes``). For each of the
pod's container images (init containers included, names normalised with ``:latest``) that a
node holds, the node earns the image size scaled by the fraction of all nodes holding it, so
an image every node has counts fully and a rare one little. The sum is clamped to
``[23 MB, 1000 MB × containers]`` and mapped linearly onto 0–100.

The image table is read once per session from the nodes' objects; each image name becomes one
column of per-node sizes, so a pod's score is a few vector additions over the candidates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import structlog

from scheduler.api.task import TaskInfo
from scheduler.framework.hooks import FloatArray, IntArray
from scheduler.framework.nodetable import NodeTable

__all__ = ["ImageTable"]

log = structlog.get_logger("lahar.imagelocality")

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
MAX_SCORE = 100


class ImageTable:
    """Per image name: the size each node holds it with (0 = absent), and how many nodes do."""

    @classmethod
    def of(cls, table: NodeTable) -> ImageTable:
        """The table's image columns: the last session's when no renewed node's images
        changed (a node's images change only with its Node object), else built anew."""
        carried = table.carried("images")
        if carried is not None:
            previous, rows = carried
            if all(previous.row_images[i] == _node_images(table.nodes[i].name,
                                                          table.nodes[i].node) for i in rows):
                table.derived["images"] = previous
                return previous
        built = cls(table)
        table.derived["images"] = built
        return built

    def __init__(self, table: NodeTable) -> None:
        self.nodes = len(table)
        self.columns: dict[str, FloatArray] = {}
        self.row_images: list[list[tuple[str, int]]] = []
        holders: dict[str, set[int]] = {}
        for row, node in enumerate(table.nodes):
            images = _node_images(node.name, node.node)
            self.row_images.append(images)
            for name, size in images:
                column = self.columns.get(name)
                if column is None:
                    column = np.zeros(self.nodes)
                    self.columns[name] = column
                column[row] = size
                holders.setdefault(name, set()).add(row)
        self.spread = {name: len(rows) / self.nodes for name, rows in holders.items()}

    def scores(self, task: TaskInfo, candidates: IntArray) -> FloatArray:
        """ImageLocality's 0–100 score of each candidate row (unweighted)."""
        images = task.spec.terms.images
        if not self.columns or not images:
            return np.zeros(len(candidates))
        total = np.zeros(len(candidates))
        for image in images:
            column = self.columns.get(image)
            if column is not None:
                # each image's contribution is truncated to whole bytes, as the Go int64 is
                total += np.trunc(column[candidates] * self.spread[image])
        ceiling = MAX_CONTAINER_THRESHOLD * len(images)
        clamped = np.clip(total, MIN_THRESHOLD, ceiling)
        return np.floor(MAX_SCORE * (clamped - MIN_THRESHOLD) / (ceiling - MIN_THRESHOLD))


def _node_images(name: str, node: Mapping[str, Any]) -> list[tuple[str, int]]:
    """``(image name, size)`` of every name a node reports; malformed entries are skipped with
    a warning naming the node and field."""
    images = (node.get("status") or {}).get("images") or []
    if not isinstance(images, list):
        log.warning("node field ignored", node=name, field="status.images", problem="not a list")
        return []
    out: list[tuple[str, int]] = []
    for i, image in enumerate(images):
        names = image.get("names") if isinstance(image, Mapping) else None
        size = image.get("sizeBytes", 0) if isinstance(image, Mapping) else None
        if (
            not isinstance(names, list)
            or not isinstance(size, int)
            or isinstance(size, bool)
            or size < 0
        ):
            log.warning(
                "node field ignored",
                node=name,
                field=f"status.images[{i}]",
                problem="needs a list of names and a non-negative integer sizeBytes",
            )
            continue
        out.extend((str(n), size) for n in names if n)
    return out
