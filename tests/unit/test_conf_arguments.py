"""Plugin and action arguments, switches and plugin names, read as Volcano reads them.

Volcano decodes the conf with gopkg.in/yaml.v2 into ``map[string]interface{}`` and reads each
argument with a typed getter (``pkg/scheduler/framework/arguments.go``); what it loads, Lahar
loads, and every value it would take silently — or replace, or skip — is one warning here,
naming the file, the tier and plugin (or the ``configurations`` entry) and the argument.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from actions.preempt import PreemptArgs
from plugins import PLUGINS
from scheduler.commands.cli import main
from scheduler.conf import ConfError, SchedulerConf, parse_conf
from scheduler.framework.action_args import action_args
from tests.builders import make_node, make_pod, simulate

WHERE = "my.conf: tiers[1].plugins[0]"


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """``lahar`` commands bind structlog to the stream pytest captures for the test; later
    tests must not log into that stream once it is closed."""
    yield
    structlog.reset_defaults()


def _one(name: str, arguments: str) -> SchedulerConf:
    """A conf whose second tier holds ``name`` with ``arguments`` (YAML flow map body)."""
    return parse_conf(
        'actions: "enqueue, allocate, backfill"\n'
        "tiers:\n- plugins: [{name: priority}, {name: gang}]\n"
        f"- plugins:\n  - name: {name}\n    arguments: {{{arguments}}}\n",
        source="my.conf")


def _built(conf: SchedulerConf, name: str) -> Any:
    """The plugin as the scheduler builds it from the parsed conf."""
    option = conf.plugin(name)
    assert option is not None
    return PLUGINS[name](option.args)


# -- 1. wrongly typed arguments: a warning, the default kept ----------------------------------

@pytest.mark.parametrize(
    ("name", "arguments", "warning", "field", "used"),
    [
        pytest.param("binpack", "binpack.weight: 10.0",
                     "argument 'binpack.weight' must be an integer, got 10.0; the default 1 is "
                     "used", "weight", 1, id="float-for-int"),
        pytest.param("binpack", "binpack.weight: heavy",
                     "argument 'binpack.weight' must be an integer, got 'heavy'; the default 1 "
                     "is used", "weight", 1, id="word-for-int"),
        pytest.param("nodeorder", 'leastrequested.weight: "2"',
                     "argument 'leastrequested.weight' must be an integer, got '2'; the default "
                     "1 is used", "least_requested", 1, id="string-for-int"),
        pytest.param("binpack", "binpack.weight: 100000000000000000000000000",
                     "argument 'binpack.weight' must be an integer, got "
                     "100000000000000000000000000 (beyond the 64-bit integers Go's int holds); "
                     "the default 1 is used", "weight", 1, id="beyond-go-int"),
        pytest.param("binpack", "binpack.weight: 9223372036854775808",
                     "argument 'binpack.weight' must be an integer, got 9223372036854775808 "
                     "(beyond the 64-bit integers Go's int holds); the default 1 is used",
                     "weight", 1, id="uint64"),
        pytest.param("binpack", "binpack.weight: 1.0e+26",
                     "argument 'binpack.weight' must be an integer, got 1e+26; the default 1 is "
                     "used", "weight", 1, id="exponent"),
        pytest.param("binpack", "binpack.weight: 1e26",
                     "argument 'binpack.weight' must be an integer, got '1e26'; the default 1 is "
                     "used", "weight", 1, id="exponent-without-dot"),
        pytest.param("sla", "sla-waiting-time: 10",
                     "argument 'sla-waiting-time' must be a string, got 10; no value (the "
                     "default) is used", "waiting_time", "", id="int-for-duration"),
        pytest.param("overcommit", "overcommit-factor: '1.5'",
                     "argument 'overcommit-factor' must be a number, got '1.5'; the default 1.2 "
                     "is used", "factor", 1.2, id="string-for-float"),
        pytest.param("overcommit", "overcommit-factor: 18446744073709551615",
                     "argument 'overcommit-factor' must be a number, got 18446744073709551615 "
                     "(beyond the 64-bit integers Go's int holds); the default 1.2 is used",
                     "factor", 1.2, id="uint64-for-float"),
        pytest.param("predicates", "predicate.NodeAffinityEnable: 'false'",
                     "argument 'predicate.NodeAffinityEnable' must be true or false, got "
                     "'false'; the default true is used", "node_affinity", True,
                     id="string-for-bool"),
        pytest.param("deviceshare", "deviceshare.ScheduleWeight: high",
                     "argument 'deviceshare.ScheduleWeight' must be an integer, got 'high'; the "
                     "default 0 is used", "weight", 0, id="deviceshare-weight"),
    ],
)
def test_a_wrongly_typed_argument_warns_and_keeps_its_default(
        name: str, arguments: str, warning: str, field: str, used: object) -> None:
    """Volcano ``Arguments.GetInt`` / ``GetFloat64`` / ``GetBool`` / ``GetString``
    (``framework/arguments.go``): a value that is not the Go type asked for (``value.(int)``
    fails for yaml.v2's float64 ``10.0``, for the uint64 or float64 it makes of an integer
    beyond int64, and for a string) is logged and the default kept; sla's ``OnSessionOpen``
    reads a non-string ``sla-waiting-time`` as no waiting time."""
    conf = _one(name, arguments)
    assert conf.warnings == (f"{WHERE} ({name}): {warning}",)
    assert getattr(_built(conf, name).args, field) == used


@pytest.mark.parametrize(
    ("arguments", "factor"),
    [("overcommit-factor: 2", 2.0), ("overcommit-factor: 1.5", 1.5),
     ("overcommit-factor: 100000000000000000000", 1e20)],
    ids=["int", "float", "beyond-uint64"],
)
def test_a_float_argument_takes_integers_as_getfloat64_does(arguments: str, factor: float) -> None:
    """Volcano ``Arguments.GetFloat64``: a float64 is taken, and so is an int
    (``argv.(int)`` fallback); yaml.v2 reads an integer beyond uint64 as a float64."""
    conf = _one("overcommit", arguments)
    assert conf.warnings == ()
    assert _built(conf, "overcommit").args.factor == factor


def test_the_largest_go_int_is_an_integer() -> None:
    """Volcano ``Arguments.GetInt``: yaml.v2 gives an integer int64 holds as ``int``."""
    conf = _one("binpack", "binpack.weight: 9223372036854775807")
    assert conf.warnings == ()
    assert _built(conf, "binpack").args.weight == 2**63 - 1


def test_a_wrongly_typed_binpack_resource_weight_keeps_its_1() -> None:
    """Volcano binpack ``calculateWeight``: ``GetInt(&resourceWeight, resourceKey)`` with
    ``resourceWeight := 1`` keeps 1 for a value that is not an int."""
    conf = _one("binpack", "binpack.resources: nvidia.com/gpu, "
                           "binpack.resources.nvidia.com/gpu: 2.5")
    assert conf.warnings == (
        f"{WHERE} (binpack): argument 'binpack.resources.nvidia.com/gpu' must be an integer, "
        "got 2.5; the default 1 is used",)
    assert _built(conf, "binpack").args.weights == {"nvidia.com/gpu": 1, "cpu": 1, "memory": 1}


@pytest.mark.parametrize(
    ("arguments", "warning", "topology_aware", "minimum"),
    [
        pytest.param('enableTopologyAwarePreemption: "true"',
                     "argument 'enableTopologyAwarePreemption' must be true or false, got "
                     "'true'; the default false is used", False, 1, id="string-for-bool"),
        pytest.param("enableTopologyAwarePreemption: true, minCandidateNodesAbsolute: 3.0",
                     "argument 'minCandidateNodesAbsolute' must be an integer, got 3.0; the "
                     "default 1 is used", True, 1, id="float-for-int"),
    ],
)
def test_a_wrongly_typed_action_argument_warns_and_keeps_its_default(
        arguments: str, warning: str, topology_aware: bool, minimum: int) -> None:
    """Volcano preempt ``parseArguments``: ``GetBool`` / ``GetInt`` on the action's
    ``configurations`` entry keep the default for a value of another type, the others
    apply; the action reads the same values each cycle."""
    conf = parse_conf(
        'actions: "allocate, preempt"\ntiers:\n- plugins: [{name: priority}, {name: gang}]\n'
        f"configurations:\n- name: preempt\n  arguments: {{{arguments}}}\n", source="my.conf")
    assert conf.warnings == (f"my.conf: configurations[0] (preempt): {warning}",)
    with capture_logs() as logs:
        args = action_args("preempt", PreemptArgs, conf.configurations)
    assert logs == []
    assert (args.topology_aware, args.min_candidate_absolute) == (topology_aware, minimum)


def test_allocate_argument_is_typed_too() -> None:
    """Volcano allocate ``parseArguments``: ``GetBool(&enablePredicateErrorCache, …)``."""
    conf = parse_conf(
        'actions: "allocate"\ntiers:\n- plugins: [{name: gang}]\n'
        "configurations:\n- name: allocate\n  arguments: {predicateErrorCacheEnable: 'no'}\n",
        source="my.conf")
    assert conf.warnings[0] == (
        "my.conf: configurations[0] (allocate): argument 'predicateErrorCacheEnable' must be "
        "true or false, got 'no'; the default true is used")


@pytest.mark.parametrize("entry", ["{name: nodeorder, enableNodeOrder: maybe}",
                                   "{name: gangg, enableJobOrder: 1}"])
def test_a_switch_that_is_not_true_or_false_is_still_an_error(entry: str) -> None:
    """Volcano ``UnmarshalSchedulerConf``: switches are ``*bool`` fields of ``PluginOption``;
    yaml.v2 cannot decode ``maybe`` into one, so the whole conf fails to load (Volcano then
    keeps its default or previous conf), whatever the plugin's name."""
    with pytest.raises(ConfError, match=r"must be true or false, got ('maybe'|1) \(Volcano "
                                        r"refuses such a conf too\)"):
        parse_conf(f"tiers:\n- plugins: [{entry}]\n", source="my.conf")


# -- 2. values Volcano accepts that are surely mistakes ---------------------------------------

@pytest.mark.parametrize(
    ("name", "arguments", "field", "used"),
    [("nodeorder", "leastrequested.weight: -3", "least_requested", -3),
     ("nodeorder", "podaffinity.weight: -1", "pod_affinity", -1),
     ("binpack", "binpack.weight: -2", "weight", -2)],
)
def test_a_negative_weight_is_used_as_given_with_a_warning(
        name: str, arguments: str, field: str, used: int) -> None:
    """Volcano nodeorder ``calculateWeight`` and binpack ``calculateWeight`` take any int from
    ``GetInt``; the score is multiplied by it, so a negative weight turns it around."""
    conf = _one(name, arguments)
    key = arguments.split(":")[0]
    assert conf.warnings == (
        f"{WHERE} ({name}): argument '{key}' is {used}: a negative weight turns that score "
        "around (the nodes it prefers come last); used as given, as in Volcano",)
    assert getattr(_built(conf, name).args, field) == used


def test_a_negative_binpack_weight_sends_the_pod_to_the_emptiest_node() -> None:
    """Volcano binpack ``BinPackingScore``: ``score *= MaxNodeScore * BinPackingWeight``."""
    objects = [make_node("busy", cpu="4"), make_node("idle", cpu="4"),
               make_pod("running", cpu="2", node="busy"), make_pod("p", cpu="1")]
    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n' \
           "    arguments: {{binpack.weight: {weight}}}\n"
    assert simulate(objects, conf=conf.format(weight=1)).node_of("p") == "busy"
    assert simulate(objects, conf=conf.format(weight=-1)).node_of("p") == "idle"


@pytest.mark.parametrize(
    ("name", "arguments", "warning", "field", "used"),
    [
        pytest.param("capacity", "ancestorReclaimLevel: -1",
                     "argument 'ancestorReclaimLevel' is -1: it cannot be negative; 0 is used, "
                     "as in Volcano", "ancestor_reclaim_level", 0, id="capacity"),
        pytest.param("overcommit", "overcommit-factor: 0.5",
                     "argument 'overcommit-factor' is 0.5: it cannot be below 1; the default "
                     "1.2 is used, as in Volcano", "factor", 1.2, id="overcommit"),
        pytest.param("binpack", "binpack.cpu: -2",
                     "argument 'binpack.cpu' is -2: a negative resource weight counts as 1, as "
                     "in Volcano", "cpu", -2, id="binpack-cpu"),
        pytest.param("sla", "sla-waiting-time: soon",
                     "argument 'sla-waiting-time' must be a positive Go duration such as 10m "
                     "or 1h30m, got 'soon'; no waiting time is set, as in Volcano (PodGroup "
                     "annotations still apply)", "waiting_time", "", id="sla"),
        pytest.param("deviceshare", "deviceshare.ScheduleWeight: -2",
                     "argument 'deviceshare.ScheduleWeight' is -2: device scores count only "
                     "above 0, so it scores nothing, as 0 does in Volcano", "weight", 0,
                     id="deviceshare"),
    ],
)
def test_a_value_volcano_replaces_is_replaced_with_a_warning(
        name: str, arguments: str, warning: str, field: str, used: object) -> None:
    """Volcano capacity ``parseArguments`` (a negative ``ancestorReclaimLevel``: warning and
    0), overcommit ``OnSessionOpen`` (a factor below 1: warning and 1.2), binpack
    ``calculateWeight`` (a negative resource weight counts as 1), sla ``OnSessionOpen`` (a
    duration ``time.ParseDuration`` refuses, or not above 0: no waiting time), deviceshare
    ``OnSessionOpen`` (device scores only while ``scheduleWeight > 0``)."""
    conf = _one(name, arguments)
    assert conf.warnings == (f"{WHERE} ({name}): {warning}",)
    assert getattr(_built(conf, name).args, field) == used


def test_binpack_cpu_weight_below_0_counts_as_1() -> None:
    """Volcano binpack ``calculateWeight``: ``if weight.BinPackingCPU < 0 { … = 1 }``."""
    conf = _one("binpack", "binpack.cpu: -2")
    assert _built(conf, "binpack").args.weights["cpu"] == 1


def test_a_binpack_resource_weight_not_listed_is_named_as_ignored() -> None:
    """Volcano binpack ``calculateWeight`` reads ``binpack.resources.<name>`` only for the names
    listed in ``binpack.resources``."""
    conf = _one("binpack", "binpack.resources.nvidia.com/gpu: 3")
    assert conf.warnings == (
        f"{WHERE} (binpack): argument 'binpack.resources.nvidia.com/gpu' is ignored: "
        "nvidia.com/gpu is not listed in binpack.resources (Volcano reads only the weights of "
        "those)",)
    assert "nvidia.com/gpu" not in _built(conf, "binpack").args.weights


# -- 3. unknown plugin and action names ---------------------------------------------------------

def test_an_unknown_plugin_is_skipped_with_the_closest_name() -> None:
    """Volcano ``framework.OpenSession``: ``GetPluginBuilder`` finds nothing, ``klog.Errorf(
    "Failed to get plugin %s.")``, and the session opens without it."""
    conf = parse_conf("tiers:\n- plugins: [{name: priority}, {name: gangg}, {name: zzz}]\n",
                      source="my.conf")
    assert [p.name for p in conf.tiers[0]] == ["priority"]
    assert conf.warnings == (
        "my.conf: tiers[0].plugins[1]: unknown plugin 'gangg' skipped (did you mean 'gang'?)",
        "my.conf: tiers[0].plugins[2]: unknown plugin 'zzz' skipped",
    )


def test_an_unknown_action_is_still_an_error() -> None:
    """Volcano ``UnmarshalSchedulerConf``: each name in ``actions`` is looked up with
    ``framework.GetAction``; one that is not found fails the load (``failed to find Action``)."""
    with pytest.raises(ConfError, match="unknown action 'allocat'"):
        parse_conf('actions: "enqueue, allocat"\ntiers:\n- plugins: [{name: gang}]\n')


# -- 4. one warning format, printed by the CLI only --------------------------------------------

EVERYTHING = """\
actions: "enqueue, allocate, backfill"
actoins: "allocate"
tiers:
- plugins:
  - name: priority
  - name: gangg
- plugins:
  - name: binpack
    arguments: {binpack.weight: 10.0, binpack.cpu: -2, binpack.wieght: 3}
  - name: nodeorder
    arguments: {leastrequested.weight: -3}
  - name: overcommit
    arguments: {overcommit-factor: 0.5}
configurations:
- name: allocate
  arguments: {predicateErrorCacheEnable: "yes"}
"""


def test_every_warning_names_the_file_and_where_in_it() -> None:
    """One shape: ``FILE: tiers[T].plugins[P] (NAME): …``, ``FILE: configurations[I]
    (ACTION): …``, ``FILE: top-level key …`` (the Volcano functions are those of the tests
    above)."""
    with capture_logs() as logs:
        conf = parse_conf(EVERYTHING, source="my.conf")
    assert logs == []  # nothing goes through structlog while the conf is read
    assert conf.warnings == (
        "my.conf: tiers[0].plugins[1]: unknown plugin 'gangg' skipped (did you mean 'gang'?)",
        "my.conf: tiers[1].plugins[0] (binpack): argument 'binpack.weight' must be an integer, "
        "got 10.0; the default 1 is used",
        "my.conf: tiers[1].plugins[0] (binpack): unknown argument 'binpack.wieght' ignored "
        "(did you mean 'binpack.weight'?)",
        "my.conf: tiers[1].plugins[0] (binpack): argument 'binpack.cpu' is -2: a negative "
        "resource weight counts as 1, as in Volcano",
        "my.conf: tiers[1].plugins[1] (nodeorder): argument 'leastrequested.weight' is -3: a "
        "negative weight turns that score around (the nodes it prefers come last); used as "
        "given, as in Volcano",
        "my.conf: tiers[1].plugins[2] (overcommit): argument 'overcommit-factor' is 0.5: it "
        "cannot be below 1; the default 1.2 is used, as in Volcano",
        "my.conf: configurations[0] (allocate): argument 'predicateErrorCacheEnable' must be "
        "true or false, got 'yes'; the default true is used",
        "my.conf: configurations[0] (allocate): argument 'predicateErrorCacheEnable' is "
        "ignored: a speed-up in Volcano; Lahar keeps no predicate error cache and places pods "
        "the same way",
        "my.conf: top-level key 'actoins' is ignored: Volcano's conf has no such key (did you "
        "mean 'actions'?)",
    )


def test_conf_check_and_simulate_print_the_warnings_on_stderr_only(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What Volcano logs and loads, ``lahar conf check`` and ``lahar simulate`` load and print
    as ``warning: FILE: …`` lines on stderr, once each, with no log lines beside them."""
    path = tmp_path / "my.conf"
    path.write_text(EVERYTHING)
    expected = parse_conf(EVERYTHING, source=str(path)).warnings
    assert main(["conf", "check", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"warning: {warning}" for warning in expected]
    assert "warning" not in out
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n")
    assert main(["simulate", "--conf", str(path), str(cluster)]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"warning: {warning}" for warning in expected]


def test_conf_check_refuses_a_non_boolean_switch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Volcano ``UnmarshalSchedulerConf`` fails on a ``*bool`` switch yaml.v2 cannot decode."""
    path = tmp_path / "bad.conf"
    path.write_text("tiers:\n- plugins: [{name: nodeorder, enableNodeOrder: maybe}]\n")
    assert main(["conf", "check", str(path)]) == 2
    assert "enableNodeOrder must be true or false, got 'maybe'" in capsys.readouterr().err


# -- 5. what Volcano refuses to start with -----------------------------------------------------

@pytest.mark.parametrize(
    ("arguments", "words"),
    [("deviceshare.GPUSharingEnable: true, deviceshare.GPUNumberEnable: true",
      "can not define true in both gpu sharing and gpu number"),
     ("deviceshare.GPUNumberEnable: true, deviceshare.VGPUEnable: true",
      "gpu-share and vgpu can't be used together")],
    ids=["share+number", "number+vgpu"],
)
def test_switches_volcano_refuses_together_are_still_errors(
        arguments: str, words: str, tmp_path: Path) -> None:
    """Volcano deviceshare ``enablePredicate``: ``klog.Fatal`` on these combinations."""
    with pytest.raises(ConfError, match=words):
        _one("deviceshare", arguments)
    path = tmp_path / "gpu.conf"
    path.write_text(f"tiers:\n- plugins:\n  - name: deviceshare\n    arguments: {{{arguments}}}\n")
    assert main(["conf", "check", str(path)]) == 2
