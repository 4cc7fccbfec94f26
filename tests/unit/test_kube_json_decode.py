"""The API server's answers decode to the same objects through orjson as through
``json.loads``, and what only the standard decoder reads still reads (client-go decodes with
``encoding/json``'s rules: ``k8s.io/apimachinery/pkg/runtime/serializer/json/json.go``)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from scheduler.cluster.kube import client
from tests.apiserver.standalone import fake_pod


def test_a_page_of_pods_decodes_as_the_standard_decoder_does() -> None:
    items: list[dict[str, Any]] = [fake_pod(i, nodes=3, scheduler="volcano", group_size=4)
                                   for i in range(20)]
    items[0]["metadata"]["annotations"] = {"note": "é ✓ \u2028", "n": "-0.5e3"}
    items[1]["spec"]["priority"] = -(2**31)
    page = {"kind": "PodList", "metadata": {"resourceVersion": "12", "continue": ""},
            "items": items}
    text = json.dumps(page).encode()
    decoded = client.loads_json(text)
    assert decoded == json.loads(text)
    assert json.dumps(decoded, sort_keys=True) == json.dumps(json.loads(text), sort_keys=True)
    assert client.loads_json(text.decode()) == decoded


def test_what_only_the_standard_decoder_reads_still_reads() -> None:
    assert math.isnan(client.loads_json(b'{"a": NaN}')["a"])
    assert client.loads_json('"\\ud800"') == "\ud800"


@pytest.mark.parametrize("text", [b"", b"{", b'{"a": 1,}', b"\xff"])
def test_broken_answers_raise_what_json_loads_raises(text: bytes) -> None:
    with pytest.raises(ValueError):
        client.loads_json(text)
    with pytest.raises(type(_error(text))):
        client.loads_json(text)


def _error(text: bytes) -> Exception:
    try:
        json.loads(text)
    except Exception as error:
        return error
    raise AssertionError("no error")
