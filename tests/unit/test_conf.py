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
        (
            "tiers: [{plugins: [{name: gang, enableJobReady: 'yes'}]}]",
            "enableJobReady must be true or false",
        ),
        ("tiers: [{plugins: [{name: gang, arguments: [1]}]}]", "arguments must be a map"),
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


def test_a_key_given_twice_in_one_map_takes_the_later_value_with_a_warning() -> None:
    """Volcano's ``UnmarshalSchedulerConf`` decodes with gopkg.in/yaml.v2's non-strict
    ``yaml.Unmarshal``: the later of two equal keys wins without a word. Lahar keeps the later
    value and names both lines."""
    text = (
        'actions: "enqueue, allocate"\n'
        "tiers:\n"
        "- plugins:\n"
        "  - name: gang\n"
        "  - name: binpack\n"
        "    arguments:\n"
        "      binpack.weight: 1\n"
        "      binpack.cpu: 2\n"
        "      binpack.weight: 5\n"
        'actions: "allocate"\n'
    )
    conf = parse_conf(text, source="dup.conf")
    assert conf.actions == ("allocate",)
    assert conf.tiers[0][1].arguments == {"binpack.weight": 5, "binpack.cpu": 2}
    repeated = [w for w in conf.warnings if "repeats" in w]
    assert repeated == [
        "dup.conf: line 9: key 'binpack.weight' repeats line 7 of the same map; the later "
        "value is used, as Volcano uses it",
        "dup.conf: line 10: key 'actions' repeats line 1 of the same map; the later value is "
        "used, as Volcano uses it",
    ]


def test_equal_keys_in_different_maps_and_merge_keys_are_not_repeats() -> None:
    text = (
        "tiers:\n"
        "- plugins:\n"
        "  - name: gang\n"
        "  - name: binpack\n"
        "    arguments: &args {binpack.weight: 2}\n"
        "- plugins:\n"
        "  - name: nodeorder\n"
        "    arguments:\n"
        "      <<: *args\n"
        "      nodeaffinity.weight: 2\n"
    )
    conf = parse_conf(text, source="ok.conf")
    assert not [w for w in conf.warnings if "repeats" in w]
