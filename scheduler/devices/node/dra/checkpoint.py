"""The prepared claims on disk, so an agent restarted between prepare and unprepare still
knows what it prepared (and answers a repeated prepare with the same devices).

As the DRA drivers' checkpoint (NVIDIA's ``checkpoint.json`` under the plugin directory, with
a checksum): one JSON file, ``<plugin dir>/checkpoint.json``, claim UID → the answer given
(devices with their requests, pool, name and CDI ids) and the claim's namespace/name. Written
atomically after every change; a file that cannot be read (truncated, wrong checksum) is set
aside as ``checkpoint.json.bad`` and the agent starts empty, saying so.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from typing import Any

import structlog

__all__ = ["Checkpoint", "CheckpointError"]

log = structlog.get_logger("lahar.nodeagent")
VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used."""


def _checksum(claims: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).hexdigest()


class Checkpoint:
    """Claim UID → prepared record; thread-safe, persisted on every change."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._claims: dict[str, dict[str, Any]] = self._load()

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            if not isinstance(data, dict) or data.get("version") != VERSION:
                raise CheckpointError("unknown checkpoint version")
            claims = data.get("claims")
            if not isinstance(claims, dict) or data.get("checksum") != _checksum(claims):
                raise CheckpointError("checksum mismatch")
            return claims
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("unreadable DRA checkpoint set aside", path=self.path, error=str(exc))
            os.replace(self.path, f"{self.path}.bad")
            return {}

    def get(self, uid: str) -> dict[str, Any] | None:
        with self._lock:
            return self._claims.get(uid)

    def claims(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._claims)

    def put(self, uid: str, record: dict[str, Any]) -> None:
        with self._lock:
            self._claims[uid] = record
            self._save()

    def remove(self, uid: str) -> None:
        with self._lock:
            if self._claims.pop(uid, None) is not None:
                self._save()

    def _save(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        temporary = f"{self.path}.tmp"
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump({"version": VERSION, "checksum": _checksum(self._claims),
                       "claims": self._claims}, f, sort_keys=True)
        os.replace(temporary, self.path)
