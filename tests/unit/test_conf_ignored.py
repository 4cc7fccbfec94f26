"""Nothing in a conf is accepted silently: whatever Lahar does not act on is named once.

Volcano's own loader (``UnmarshalSchedulerConf`` in ``pkg/scheduler/framework``, called from
``Scheduler.loadSchedulerConf``) treats an empty conf as invalid and keeps running its built-in
default; Lahar does the same, with a warning. Volcano's ``GetArgOfActionFromConf`` reads the
first ``configurations`` entry of an action; so does Lahar.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog
import structlog.testing

from scheduler.commands.cli import main
from scheduler.conf import ConfError, ignored, load_conf, parse_conf

QUICKSTART = Path(__file__).resolve().parents[2] / "conf" / "samples" / "quickstart.yaml"
TIERS = """
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: nodeorder}]
"""


def _conf(text: str) -> tuple[str, ...]:
    return parse_conf(text, source="t.conf").warnings


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "{}"])
def test_empty_conf_is_an_error(text: str) -> None:
    with pytest.raises(ConfError, match=r"t\.conf: the conf is empty; it needs actions and tiers"):
        parse_conf(text, source="t.conf")


def test_conf_without_actions_uses_volcano_default_actions() -> None:
    conf = parse_conf(TIERS, source="t.conf")
    assert conf.actions == ("enqueue", "allocate", "backfill")
    assert conf.warnings == ()


def test_empty_actions_is_an_error() -> None:
    with pytest.raises(ConfError, match=r"t\.conf: actions is empty"):
        parse_conf('actions: " , "\n' + TIERS, source="t.conf")


def test_conf_without_plugins_warns() -> None:
    warnings = _conf('actions: "allocate"\n')
    assert warnings == (
        "t.conf: no plugins in tiers; pods are placed by resources alone "
        "(no gang, queue share, priority or node predicates)",
    )


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("predicate.VolumeBindingEnable", "does not model volumes"),
        ("predicate.VolumeZoneEnable", "does not model volumes"),
        ("predicate.NodeVolumeLimitsEnable", "does not model volumes"),
        ("predicate.CacheEnable", "placements are the same either way"),
    ],
)
@pytest.mark.parametrize("value", [True, False])
def test_predicate_switches_without_effect_warn_once_naming_them(
    key: str, reason: str, value: bool
) -> None:
    text = f'actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n' \
           f"    arguments: {{{key}: {str(value).lower()}}}\n"
    warnings = _conf(text)
    assert len(warnings) == 1
    assert warnings[0].startswith(f"t.conf: tiers[0].plugins[0] (predicates): argument '{key}' "
                                  f"is ignored: ")
    assert reason in warnings[0]


def test_acted_on_switches_do_not_warn() -> None:
    text = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - {name: priority}
  - {name: gang, enablePreemptable: false, enableJobStarving: false}
  - {name: conformance}
- plugins:
  - {name: drf, enablePreemptable: false}
  - name: predicates
    arguments: {predicate.NodeAffinityEnable: true, predicate.TaintTolerationEnable: false,
                predicate.PodAffinityEnable: true, predicate.PodTopologySpreadEnable: true,
                predicate.GPUSharingEnable: false}
  - {name: proportion, enabledOverused: false}
  - name: nodeorder
    arguments: {leastrequested.weight: 1, podaffinity.weight: 2, imagelocality.weight: 1,
                podtopologyspread.weight: 2}
  - name: binpack
    arguments: {binpack.weight: 5}
configurations:
- name: enqueue
  arguments: {}
"""
    assert _conf(text) == ()


@pytest.mark.parametrize(
    ("entry", "flag"),
    [
        ("{name: gang, enabledClusterOrder: true}", "enabledClusterOrder"),
        ("{name: priority, enableBestNode: false}", "enableBestNode"),
        ("{name: binpack, enableJobOrder: false}", "enableJobOrder"),
        ("{name: overcommit, enableHierarchy: true}", "enableHierarchy"),
        ("{name: gang, enabledHyperNodeOrder: true}", "enabledHyperNodeOrder"),
    ],
)
def test_flag_that_switches_nothing_warns(entry: str, flag: str) -> None:
    warnings = _conf(f'actions: "allocate"\ntiers:\n- plugins: [{entry}]\n')
    name = entry.split(",")[0].split(": ")[1]
    assert warnings == (
        f"t.conf: tiers[0].plugins[0] ({name}): flag {flag} is ignored: "
        f"{name} has no hook it switches",
    )


def test_action_configurations_are_checked() -> None:
    text = 'actions: "enqueue, allocate, backfill"\n' + TIERS.replace("tiers:\n", "tiers:\n", 1) + """
configurations:
- name: allocate
  arguments: {predicateErrorCacheEnable: false, preemptEverything: true}
- name: allocate
  arguments: {predicateErrorCacheEnable: true}
- name: preempt
  arguments: {enableTopologyAwarePreemption: true}
- name: alocate
  arguments: {}
"""
    assert _conf(text) == (
        "t.conf: configurations[0] (allocate): unknown argument 'preemptEverything' ignored",
        "t.conf: configurations[0] (allocate): argument 'predicateErrorCacheEnable' is ignored: "
        "a speed-up in Volcano; Lahar keeps no predicate error cache and places pods the same "
        "way",
        "t.conf: configurations[1] (allocate): this second entry is ignored: the first one is "
        "used, as in Volcano",
        "t.conf: configurations[2] (preempt): action 'preempt' is ignored: it is not in actions",
        "t.conf: configurations[3] (alocate): action 'alocate' is ignored: there is no such "
        "action (did you mean 'allocate'?)",
    )
    conf = parse_conf(text)
    assert conf.configurations["allocate"] == {
        "predicateErrorCacheEnable": False, "preemptEverything": True}


def test_metrics_section_warns() -> None:
    warnings = _conf('actions: "allocate"\n' + TIERS.split("\n", 1)[1].join(["", ""]) +
                     TIERS + "metrics: {type: prometheus, address: 'http://p:9090'}\n")
    assert any(w.startswith("t.conf: top-level key 'metrics' is ignored: no Lahar plugin reads "
                            "node usage") for w in warnings)


def test_ignored_has_one_shape() -> None:
    assert ignored("x.conf", "plugin 'tdm'", "Lahar does not implement it") == (
        "x.conf: plugin 'tdm' is ignored: Lahar does not implement it")


def test_cli_prints_each_warning_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "lahar.conf"
    path.write_text('actions: "enqueue, allocate"\n' + TIERS.replace(
        "{name: predicates}", "{name: predicates, arguments: {predicate.CacheEnable: true}}"))
    assert main(["conf", "check", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.count("predicate.CacheEnable") == 1 and err.startswith("warning: ")
    assert main(["simulate", "--conf", str(path), str(QUICKSTART)]) == 0
    assert capsys.readouterr().err.count("predicate.CacheEnable") == 1


def test_cli_refuses_an_empty_conf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.conf"
    path.write_text("")
    assert main(["conf", "check", str(path)]) == 2
    assert "the conf is empty" in capsys.readouterr().err
    assert main(["simulate", "--conf", str(path), str(QUICKSTART)]) == 2


def test_load_conf_logs_warnings_for_lahar_run(tmp_path: Path) -> None:
    """``lahar run`` loads (and reloads) its conf with :func:`load_conf`, which logs."""
    path = tmp_path / "lahar.conf"
    path.write_text('actions: "allocate"\n')
    structlog.reset_defaults()  # an earlier ``main()`` bound logging to a closed capture
    with structlog.testing.capture_logs() as logs:
        conf = load_conf(path)
        load_conf(path, log_warnings=False)
    assert [entry["message"] for entry in logs] == list(conf.warnings)
    assert "no plugins in tiers" in conf.warnings[0]


def test_shuffle_without_a_victim_tasks_plugin_warns_that_it_evicts_nothing() -> None:
    """Volcano's shuffle evicts what ``ssn.VictimTasks`` returns; only its rescheduling plugin
    feeds that hook, which Lahar does not implement."""
    conf = parse_conf('actions: "enqueue, allocate, shuffle"\ntiers:\n- plugins:\n'
                      '  - name: priority\n  - name: gang\n', source="c.conf")
    assert [w for w in conf.warnings if "shuffle" in w] == [
        "c.conf: action 'shuffle' evicts only what a VictimTasks plugin names and no plugin "
        "here feeds it (Volcano's rescheduling plugin does; Lahar has none yet): shuffle "
        "evicts nothing"]
    quiet = parse_conf('actions: "enqueue, allocate"\ntiers:\n- plugins:\n'
                       '  - name: priority\n', source="c.conf")
    assert not [w for w in quiet.warnings if "shuffle" in w]


def test_preempt_and_reclaim_arguments_are_warned_once_at_load_and_not_again_per_cycle(
) -> None:
    """Keys Volcano's preempt reads but Lahar does not act on are named at conf load, like
    allocate's; running the actions then logs nothing more about their arguments, not even
    about a value of the wrong type, which keeps its default as Volcano's ``GetInt`` keeps it
    (the conf loader warned about it)."""
    from structlog.testing import capture_logs

    from actions.preempt import PreemptArgs
    from actions.reclaim import ReclaimArgs
    from scheduler.framework.action_args import action_args

    text = 'actions: "allocate, preempt, reclaim"\n' + TIERS + """
configurations:
- name: preempt
  arguments: {topologyAwarePreemptWorkerNum: 4, bogus: 1}
- name: reclaim
  arguments: {predicateErrorCacheEnable: true}
"""
    conf = parse_conf(text, source="t.conf")
    assert conf.warnings == (
        "t.conf: configurations[0] (preempt): unknown argument 'bogus' ignored",
        "t.conf: configurations[0] (preempt): argument 'topologyAwarePreemptWorkerNum' is "
        "ignored: the dry runs are done one node after another",
        "t.conf: configurations[1] (reclaim): argument 'predicateErrorCacheEnable' is ignored: "
        "candidate nodes are filtered per task with vector masks, so there is no per-role "
        "error cache to switch",
    )
    with capture_logs() as logs:
        action_args("preempt", PreemptArgs, conf.configurations, warned=set())
        action_args("reclaim", ReclaimArgs, conf.configurations, warned=set())
        bad = action_args("preempt", PreemptArgs,
                          {"preempt": {"minCandidateNodesAbsolute": "x",
                                       "maxCandidateNodesAbsolute": 7}}, warned=set())
    assert logs == []
    assert (bad.min_candidate_absolute, bad.max_candidate_absolute) == (1, 7)
