"""Server-rendered HTML of the web view's pages, from a view's data (see :mod:`.view`).

Each page is a function of the view's JSON-ready data, returning the body of ``<main>``;
:func:`document` wraps bodies into one HTML document (one page for a served view, every page
for a ``simulate --html`` file). Bars are plain elements sized in percent, the chart an inline
SVG: nothing is fetched from anywhere. Every text from the cluster is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from scheduler.web.assets import REFRESH_MS, SCRIPT, STYLE

__all__ = ["PAGES", "document", "page_body", "quantity"]

PAGES: dict[str, str] = {
    "overview": "Overview", "queues": "Queues", "jobs": "Jobs",
    "nodes": "Nodes & devices", "topology": "Topology",
}
_GI = 1024.0**3


def quantity(name: str, value: float | None) -> str:
    """A readable figure: cores for cpu, GiB for memory, MiB for card memory, else a count."""
    if value is None:
        return "–"
    if name == "cpu":
        return f"{value / 1000:g}"
    if name == "memory":
        return f"{value / _GI:.1f}Gi" if value >= _GI / 10 or not value else f"{value:g}"
    if name == "card-memory":
        return f"{value / 1024:.1f}Gi" if value >= 1024 else f"{value:g}Mi"
    return f"{value:g}"


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 90:
        return f"{seconds}s"
    if seconds < 5400:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


def bar(used: float | None, total: float | None, *, mark: float | None = None,
        label: str = "") -> str:
    """A bar of ``used`` against ``total``; ``mark`` draws a line (e.g. deserved)."""
    if not total or used is None:
        return f'<span class="muted">{_e(label) or "–"}</span>'
    share = max(min(used / total, 1.0), 0.0)
    tone = " bad" if used > total else (" warn" if share >= 0.9 else "")
    line = (f'<b style="left:{min(mark / total, 1.0) * 100:.1f}%"></b>'
            if mark is not None and total else "")
    return (f'<span class="meter"><span class="bar" title="{_e(label)}"><i class="{tone.strip()}" '
            f'style="width:{share * 100:.1f}%"></i>{line}</span>'
            f'<span class="lbl">{_e(label)}</span></span>')


def _pill(text: str) -> str:
    return f'<span class="pill {_e(text)}">{_e(text)}</span>'


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], *,
           numeric: frozenset[int] = frozenset(), empty: str = "nothing here yet") -> str:
    if not rows:
        return f'<p class="muted">{_e(empty)}</p>'
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(
        f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
        for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _tile(key: str, value: str, sub: str = "") -> str:
    return (f'<div class="tile"><div class="k">{_e(key)}</div><div class="v">{value}</div>'
            f'<div class="s">{sub}</div></div>')


def _chart(history: Sequence[Mapping[str, Any]]) -> str:
    """Pending pods (blue) and cycle time (orange), the last 15 minutes, inline SVG."""
    width, height, pad = 640, 150, 24
    points = [p for p in history if p.get("at") is not None]
    if len(points) < 2:
        return '<p class="muted">the chart fills in as cycles run</p>'
    t0, t1 = points[0]["at"], points[-1]["at"]
    span = max(t1 - t0, 1e-9)
    legend: list[str] = []

    def line(key: str, colour: str) -> str:
        values = [(p["at"], p[key]) for p in points if p.get(key) is not None]
        if len(values) < 2:
            return ""
        top = max(v for _, v in values) or 1.0
        xy = " ".join(f"{pad + (t - t0) / span * (width - 2 * pad):.1f},"
                      f"{height - pad - v / top * (height - 2 * pad):.1f}" for t, v in values)
        legend.append(f'<span style="color:{colour}">&#9644; {_e(key.replace("_", " "))} '
                      f"(peak {top:.3g})</span>")
        return f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{xy}"/>'

    lines = line("pending", "#3c6fd1") + line("cycle_seconds", "#e07b26")
    return (f'<svg class="chart" width="{width}" height="{height}" role="img" '
            f'aria-label="pending pods and cycle time">'
            f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
            f'stroke="#cbd2d9"/>{lines}</svg>'
            f'<div class="lbl" style="margin:4px 0 0">{" &nbsp; ".join(legend)}</div>')


def overview(data: Mapping[str, Any], stats: Mapping[str, Any]) -> str:
    o = data["overview"]
    gpu = (f"{quantity('card-memory', o['gpu_memory_used'])} / "
           f"{quantity('card-memory', o['gpu_memory'])}" if o["gpu_memory"] else "–")
    share = (f"{o['gpu_memory_used'] / o['gpu_memory'] * 100:.0f}% of card memory"
             if o["gpu_memory"] else "no shared cards")
    cyc = stats.get("cycle_seconds") or {}
    tiles = "".join((
        _tile("Nodes", f"{o['nodes']}", f"{o['nodes_ready']} ready"),
        _tile("Pods bound", f"{o['pods_bound']}", f"{o['jobs']} jobs"),
        _tile("Pods pending", f"{o['pods_pending']}"),
        _tile("GPU cards in use", f"{o['gpu_cards_in_use']} / {o['gpu_cards']}", share),
        _tile("GPU memory", gpu),
        _tile("Cycle time", f"{cyc.get('last', 0) * 1000:.1f} ms",
              f"p50 {cyc.get('p50', 0) * 1000:.1f} · p99 {cyc.get('p99', 0) * 1000:.1f} ms"),
        _tile("Binds / s", f"{stats.get('binds_per_second', 0):.1f}",
              f"over {_duration(stats.get('window_seconds', 0))}"),
    ))
    devices = [[_e(name), bar(v["used"], v["allocatable"],
                              label=f"{v['used']:g} / {v['allocatable']:g}")]
               for name, v in o["device_resources"].items()]
    return (f"<h1>Overview</h1><div class='tiles'>{tiles}</div>"
            f"<h2>Pending pods and cycle time, last 15 minutes</h2>"
            f"{_chart(stats.get('history', []))}"
            + (f"<h2>Device resources</h2>{_table(['Resource', 'Used / allocatable'], devices)}"
               if devices else ""))


def _resource_bars(q: Mapping[str, Any]) -> str:
    names = [n for n in ("cpu", "memory") if n in q["allocated"] or n in q["deserved"]]
    names += sorted((set(q["allocated"]) | set(q["deserved"]) | set(q["capability"]))
                    - {"cpu", "memory"})
    out = []
    for name in names:
        used = q["allocated"].get(name, 0.0)
        deserved = q["deserved"].get(name)
        cap = q["capability"].get(name)
        total = cap if cap else (deserved if deserved else None)
        label = (f"{name} {quantity(name, used)}"
                 + (f" · deserved {quantity(name, deserved)}" if deserved is not None else "")
                 + (f" · cap {quantity(name, cap)}" if cap else ""))
        out.append(f"<div>{bar(used, total, mark=deserved if cap else None, label=label)}</div>")
    return "".join(out) or '<span class="muted">nothing allocated</span>'


def queues(data: Mapping[str, Any]) -> str:
    by_parent: dict[str, list[Mapping[str, Any]]] = {}
    for q in data["queues"]:
        by_parent.setdefault(q["parent"], []).append(q)
    rows: list[list[str]] = []

    def walk(parent: str, depth: int) -> None:
        for q in by_parent.get(parent, []):
            j = q["jobs"]
            rows.append([
                f'<span class="tree" style="--d:{depth}">{_e(q["name"])}</span>',
                _pill(q["state"]), f"{q['weight']}", _resource_bars(q),
                _e(", ".join(f"{k} {quantity(k, v)}" for k, v in q["guarantee"].items()) or "–"),
                f"{q['share']:.2f}", f"{j['inqueue']}", f"{j['pending']}", f"{j['running']}",
                _pill("Overused") if q["overused"] else '<span class="muted">no</span>'])
            walk(q["name"], depth + 1)

    walk("", 0)
    return "<h1>Queues</h1>" + _table(
        ["Queue", "State", "Weight", "Allocated against deserved and capability", "Guarantee",
         "Share", "Inqueue", "Pending", "Running", "Overused"], rows,
        numeric=frozenset({2, 5, 6, 7, 8}), empty="no queues")


def _job_link(job: Mapping[str, Any], *, file: bool) -> str:
    target = (f"#job-{quote(job['uid'], safe='')}" if file
              else f"/jobs/{quote(job['namespace'])}/{quote(job['name'])}")
    return f'<a href="{_e(target)}">{_e(job["namespace"])}/{_e(job["name"])}</a>'


def jobs(data: Mapping[str, Any], *, file: bool = False) -> str:
    rows = [[
        _job_link(j, file=file), _e(j["queue"]), _pill(j["phase"]), f"{j['min_member']}",
        f"{j['ready']}", f"{j['running']}", f"{j['pending']}", f"{j['priority']}",
        _duration(j["age_seconds"]), _duration(j["waiting_seconds"]) if j["pending"] else "–",
        f"{j['queue_position']}" if j["queue_position"] else "–",
        f'<span class="reason">{_e(j["reason"])}</span>' if j["reason"] else "",
    ] for j in data["jobs"]]
    return "<h1>Jobs</h1>" + _table(
        ["Job", "Queue", "Phase", "minMember", "Ready", "Running", "Pending", "Priority", "Age",
         "Waiting", "Position", "Pending reason"], rows,
        numeric=frozenset({3, 4, 5, 6, 7, 10}), empty="no jobs")


def job(j: Mapping[str, Any], events: Sequence[Mapping[str, Any]] = ()) -> str:
    pods = [[_e(p["name"]), _pill(p["status"].title()), _e(p["node"] or "–"),
             _e(", ".join(f"{k} {quantity(k, v)}" for k, v in p["request"].items())),
             "<br>".join(f"{_e(k)}={_e(v)}" for k, v in sorted(p["devices"].items())) or "–",
             f'<span class="reason">{_e(p.get("message", ""))}</span>'] for p in j["pods"]]
    conds = [[_e(c.get("type", "")), _e(c.get("status", "")), _e(c.get("reason", "")),
              _e(c.get("message", ""))] for c in j["conditions"]]
    evs = [[_e(e.get("type", "")), _e(e.get("reason", "")), _e(e.get("message", ""))]
           for e in events]
    return (f"<h1>Job {_e(j['namespace'])}/{_e(j['name'])} {_pill(j['phase'])}</h1>"
            f"<p>queue <b>{_e(j['queue'])}</b> · minMember {j['min_member']} · priority "
            f"{j['priority']} · ready {j['ready']} · pending {j['pending']}</p>"
            "<h2>Pods</h2>" + _table(["Pod", "Status", "Node", "Request", "Devices", "Reason"],
                                     pods)
            + "<h2>Conditions</h2>" + _table(["Type", "Status", "Reason", "Message"], conds,
                                             empty="no conditions")
            + ("<h2>Events</h2>" + _table(["Type", "Reason", "Message"], evs) if evs else ""))


def nodes(data: Mapping[str, Any]) -> str:
    rows = []
    for n in data["nodes"]:
        a, u = n["allocatable"], n["used"]
        state = "ok" if n["ready"] and not n["unschedulable"] else "bad"
        rows.append([
            _e(n["name"]),
            _pill("Ready" if state == "ok" else ("Cordoned" if n["unschedulable"] else "NotReady")
                  ).replace('pill Ready', 'pill ok').replace('pill Cordoned', 'pill bad')
            .replace('pill NotReady', 'pill bad'),
            bar(u.get("cpu", 0), a.get("cpu"),
                label=f"{quantity('cpu', u.get('cpu', 0))} / {quantity('cpu', a.get('cpu'))}"),
            bar(u.get("memory", 0), a.get("memory"),
                label=f"{quantity('memory', u.get('memory', 0))} / "
                      f"{quantity('memory', a.get('memory'))}"),
            bar(u.get("pods", 0), a.get("pods"), label=f"{u.get('pods', 0):g} / "
                                                       f"{a.get('pods', 0):g}"),
            f"{len(n['cards'])}" if n["cards"] else "–"])
    cards = []
    for n in data["nodes"]:
        for c in n["cards"]:
            if "status" in c:
                cards.append([_e(n["name"]), _e(c["family"]), "", _e(c["status"]), "", "", ""])
                continue
            mem = bar(c["memory_used"], c["memory"],
                      label=f"{quantity('card-memory', c['memory_used'])} / "
                            f"{quantity('card-memory', c['memory'])}")
            cores = (bar(c["cores_used"], c["cores"], label=f"{c['cores_used']} / {c['cores']}%")
                     if c["cores"] else "–")
            shares = (f"{c['shares_used']} / {c['shares']}" if c["shares"]
                      else f"{c['shares_used']}")
            cards.append([_e(n["name"]), _e(c["family"]), _e(f"{c['index']} {c['type']}".strip()),
                          mem, cores, shares, _e(", ".join(c["pods"])) or "–"])
    return ("<h1>Nodes</h1>" + _table(["Node", "State", "CPU", "Memory", "Pods", "Cards"], rows,
                                      numeric=frozenset({5}), empty="no nodes")
            + "<h2>Devices</h2>" + _table(
                ["Node", "Family", "Card", "Memory", "Cores", "Holders", "Pods"], cards,
                empty="no shared devices on any node"))


def topology(data: Mapping[str, Any]) -> str:
    tree = data["topology"]
    if not tree:
        return "<h1>Topology</h1><p class='muted'>no HyperNodes in this cluster</p>"
    by_parent: dict[str, list[Mapping[str, Any]]] = {}
    for h in tree:
        by_parent.setdefault(h["parent"], []).append(h)
    rows: list[list[str]] = []

    def walk(parent: str, depth: int) -> None:
        for h in by_parent.get(parent, []):
            u, a = h["used"], h["allocatable"]
            rows.append([f'<span class="tree" style="--d:{depth}">{_e(h["name"])}</span>',
                         f"{h['tier']}" + (f" ({_e(h['tier_name'])})" if h["tier_name"] else ""),
                         f"{len(h['nodes'])}",
                         bar(u.get("cpu", 0), a.get("cpu"),
                             label=f"{quantity('cpu', u.get('cpu', 0))} / "
                                   f"{quantity('cpu', a.get('cpu'))}"),
                         _e(", ".join(h["jobs"])) or "–"])
            walk(h["name"], depth + 1)

    walk("", 0)
    return "<h1>Topology</h1>" + _table(["HyperNode", "Tier", "Nodes", "CPU used", "Jobs"], rows,
                                        numeric=frozenset({2}))


def page_body(name: str, data: Mapping[str, Any], stats: Mapping[str, Any], *,
              file: bool = False) -> str:
    if name == "overview":
        return overview(data, stats)
    if name == "queues":
        return queues(data)
    if name == "jobs":
        return jobs(data, file=file)
    if name == "nodes":
        return nodes(data)
    return topology(data)


def document(*, title: str, sections: Sequence[tuple[str, str]], active: str = "",
             file: bool = False, footer: str = "") -> str:
    """One HTML document; ``sections`` are ``(id, body)``; a file gets every page in it."""
    links = "".join(
        f'<a href="{"#" + key if file else "/" + ("" if key == "overview" else key)}"'
        f'{" class=on" if key == active else ""}>{_e(label)}</a>'
        for key, label in PAGES.items())
    if file:
        main = "".join(f'<section class="page" id="page-{_e(sid)}">{body}</section>'
                       for sid, body in sections)
    else:
        main = "".join(body for _, body in sections)
    mode = 'data-mode="file"' if file else f'data-mode="live" data-refresh="{REFRESH_MS}"'
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width,initial-scale=1'>"
            # no favicon request: the page asks for nothing outside itself
            f"<title>{_e(title)}</title><link rel=icon href='data:,'><style>{STYLE}</style>"
            "</head>"
            f"<body {mode}><header><b>Lahar</b><nav>{links}</nav></header>"
            f"<main>{main}</main><footer>{footer}</footer><script>{SCRIPT}</script>"
            "</body></html>")
