"""One self-contained HTML file of the view (``lahar simulate --html FILE``).

Every page is a section of the one document, the jobs' pages too, with the view's JSON
embedded (``<script type="application/json" id="lahar-view">``) for scripts; the file loads
nothing and opens without a network or a server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from scheduler.web.pages import PAGES, document, job, page_body
from scheduler.web.publish import Publisher

__all__ = ["render_file"]


def render_file(publisher: Publisher, *,
                events: Sequence[Mapping[str, Any]] = ()) -> str:
    """The HTML file of ``publisher``'s latest view; ``events`` are the cluster's Events
    (each job page lists those about its PodGroup and pods)."""
    view = publisher.current()
    if view is None:
        raise ValueError("no view was published: the simulation ran no cycle")
    stats = publisher.summary()
    sections = [(key, page_body(key, view.data, stats, file=True)) for key in PAGES]
    by_object: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        by_object.setdefault((str(involved.get("namespace", "")), str(involved.get("name", ""))),
                             []).append(event)
    for entry in view.data["jobs"]:
        related = [e for key in [(entry["namespace"], entry["name"]),
                                 *((entry["namespace"], p["name"]) for p in entry["pods"])]
                   for e in by_object.get(key, [])]
        sections.append((f"job-{quote(entry['uid'], safe='')}", job(entry, related)))
    payload = json.dumps({"cycle": view.cycle, **view.data, "stats": stats})
    embedded = payload.replace("</", "<\\/")
    footer = (f"simulated · {view.cycle} cycle(s) · view built in "
              f"{view.build_seconds * 1000:.1f} ms"
              f'<script type="application/json" id="lahar-view">{embedded}</script>')
    return document(title="Lahar · simulated cluster", sections=sections, active="overview",
                    file=True, footer=footer)
