"""The fine-grained switch and its arguments, and the shipped conf and sample cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.commands.cli import main
from scheduler.conf import ConfError, parse_conf
from scheduler.deviceconf import device_support
from tests.devices.finegrained_helpers import finegrained_conf

ROOT = Path(__file__).resolve().parents[2]


def test_switch_turns_the_family_on_with_scoring_and_weights() -> None:
    conf = parse_conf(finegrained_conf(scoring="MostAllocated", FineGrainedScoringResources=[
        {"name": "koordinator.sh/gpu-core", "weight": 2}]))
    support = device_support(conf)
    assert [f.NAME for f in support.families] == ["FineGrained"]
    assert support.config.finegrained_scoring == "MostAllocated"
    assert support.config.finegrained_weights == (("koordinator.sh/gpu-core", 2),)
    assert "koordinator.sh/gpu.shared" in support.cache_options()["ignored_resources"]


@pytest.mark.parametrize(("extra", "key"), [
    pytest.param({"FineGrainedScoring": "Balanced"}, "deviceshare.FineGrainedScoring",
                 id="unknown-strategy"),
    pytest.param({"FineGrainedScoringResources": [{"name": "x", "weight": -1}]},
                 "deviceshare.FineGrainedScoringResources", id="negative-weight"),
    pytest.param({"FineGrainedScoringResources": ["koordinator.sh/rdma"]},
                 "deviceshare.FineGrainedScoringResources", id="not-a-map"),
    pytest.param({"FineGrainedShareUnsupportedModels": [{"vendor": "nvidia"}]},
                 "deviceshare.FineGrainedShareUnsupportedModels", id="model-missing"),
])
def test_bad_arguments_are_errors_naming_the_key(extra: dict[str, object], key: str) -> None:
    text = finegrained_conf().rstrip("}\n") + ", " + ", ".join(
        f"deviceshare.{k}: {json.dumps(v)}" for k, v in extra.items()) + "}}\n"
    with pytest.raises((ConfError, ValueError), match=key):
        parse_conf(text)


def test_sample_conf_and_cluster_run_through_lahar_simulate(
        capsys: pytest.CaptureFixture[str]) -> None:
    conf = ROOT / "conf" / "finegrained.conf"
    sample = ROOT / "conf" / "samples" / "finegrained.yaml"
    assert main(["conf", "check", str(conf)]) == 0
    assert main(["simulate", "--conf", str(conf), str(sample)]) == 0
    out = capsys.readouterr().out
    assert "settled" in out
    assert "default/invalid-both-memory" in out
    assert "cannot be requested together" in out
    for pod in ("notebook-half", "infer-20gi", "infer-gpu-30", "train-2gpu", "train-4gpu-rdma",
                "infer-2vf"):
        assert f"default/{pod}" in out.split("PENDING")[0]
