import pytest

from scheduler.conf import ConfError, load_conf, parse_conf


def test_default_conf() -> None:
    conf = load_conf(None)
    assert conf.actions == ("enqueue", "allocate", "backfill")
    assert [[p.name for p in tier] for tier in conf.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
    ]
    assert conf.tiers[0][0].flags["enableJobOrder"] is True
    assert conf.tiers[0][0].flags["enableHierarchy"] is False


def test_shipped_confs_load() -> None:
    for name in ("conf/lahar-scheduler.conf", "conf/binpack.conf"):
        assert load_conf(name).tiers


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('actions: "enqueue, allocat"', "unknown action 'allocat'"),
        ("tiers: [{plugins: [{name: gangg}]}]", "unknown plugin 'gangg'"),
        (
            "tiers: [{plugins: [{name: binpack, arguments: {binpack.weight: heavy}}]}]",
            "plugin binpack: argument 'binpack.weight' must be an integer, got 'heavy'",
        ),
        (
            "tiers: [{plugins: [{name: gang, enableJobReady: 'yes'}]}]",
            "enableJobReady must be true or false",
        ),
        (
            "tiers: [{plugins: [{name: drf, enableHierarchy: true}, {name: proportion}]}]",
            "drf with enableHierarchy cannot be combined with proportion",
        ),
        ("actions: [allocate]", "actions must be a comma-separated string"),
        ("tiers: {plugins: []}", "tiers must be a list"),
        ("a: [", "not valid YAML"),
    ],
)
def test_bad_conf_is_rejected_with_its_name(text: str, message: str) -> None:
    with pytest.raises(ConfError, match=message.replace("[", r"\[").replace("(", r"\(")):
        parse_conf(text, source="test.conf")


def test_unknown_argument_warns_and_typed_args_apply() -> None:
    conf = parse_conf("""
tiers:
- plugins:
  - name: binpack
    arguments: {binpack.weight: 5, binpack.resources: "nvidia.com/gpu", binpack.resources.nvidia.com/gpu: 3,
                binpack.wieght: 1}
""")
    option = conf.tiers[0][0]
    assert option.args.weight == 5
    assert option.args.weights == {"cpu": 1, "memory": 1, "nvidia.com/gpu": 3}
    assert any("binpack.wieght" in w for w in conf.warnings)


def test_missing_file_is_a_conf_error() -> None:
    with pytest.raises(ConfError, match="cannot read"):
        load_conf("/nonexistent/lahar.conf")
