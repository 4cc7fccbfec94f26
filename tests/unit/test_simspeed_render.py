"""The simulate table reads each distinct container set's requests once: pods that share one
still show their own usage, and a vGPU pod's held memory never leaks into a sibling's row."""

from __future__ import annotations

from typing import Any

from scheduler.commands.report import _Requests, render_table
from tests.builders import make_node, make_pod


def _placed(name: str, node: str, **kwargs: Any) -> dict[str, Any]:
    return make_pod(name, node=node, phase="Running", **kwargs)


def _node_row(table: str, node: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(node + " "))


def test_shared_requests_are_read_once_and_kept_apart_from_vgpu_holdings() -> None:
    nodes = [make_node(n, cpu="4", extra={"volcano.sh/vgpu-memory": "16000",
                                          "volcano.sh/vgpu-number": "4"}) for n in ("n1", "n2")]
    vgpu = _placed("a", "n1", cpu="1", annotations={
        "volcano.sh/vgpu-ids-new": "GPU-0,NVIDIA,3000,20:;"})
    plain = _placed("b", "n2", cpu="1")
    table = render_table([*nodes, vgpu, plain])
    assert "volcano.sh/vgpu-memory 3000/16000 (19%)" in _node_row(table, "n1")
    row = _node_row(table, "n2")  # same containers as pod a, which came first
    assert "default/b   1/4 (25%)" in row
    assert "volcano.sh/vgpu-memory 0/16000 (0%); volcano.sh/vgpu-number 0/4 (0%)" in row


def test_requests_are_shared_only_between_equal_container_sets() -> None:
    requests = _Requests()
    first = requests.of(make_pod("a", cpu="1"))
    assert requests.of(make_pod("b", cpu="1")) is first
    other = requests.of(make_pod("c", cpu="2"))
    assert other.milli_cpu == 2000 and first.milli_cpu == 1000
    integer = make_pod("d", cpu=None)
    integer["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 1
    assert requests.of(integer) is not first and requests.of(integer).milli_cpu == 1000
