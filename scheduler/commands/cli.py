"""The ``lahar`` command line: ``simulate``, ``conf check``, ``inspect``, ``replay``,
``device``, ``completion`` and (with a cluster) ``run`` and ``shard-controller``.

Every sub-command is registered unconditionally: a broken installation fails with its import
error instead of quietly losing commands. A command's module is imported only when that
command runs or its help is asked for: ``lahar --help`` and ``lahar --version`` import none of
them (the scheduler, numpy and the Kubernetes client cost most of a second), and building the
parser checks with :func:`importlib.util.find_spec` that each module can be found, so a
missing one still fails every command loudly. Conf and manifest warnings are printed once
each, as ``warning: …`` lines on stderr.

Exit codes: 0 success, 1 runtime failure, 2 bad input (manifests, conf, flags), 130
interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.cluster.kube.volcano_flags import VersionAction, installed_version

__all__ = ["COMMANDS", "build_parser", "main", "version"]


def version() -> str:
    """The installed distribution's version (the source tree's when run uninstalled)."""
    return installed_version()


@dataclass(frozen=True, slots=True)
class Command:
    """A sub-command: its one-line help and the ``(module, function)`` pairs that register
    its parser (``function(subparsers)``), imported only when the command is used."""

    help: str
    registrars: tuple[tuple[str, str], ...] = ()
    needs: tuple[str, ...] = ()
    """Further modules the command imports when it runs: checked, not imported."""


COMMANDS: dict[str, Command] = {
    "simulate": Command("schedule Kubernetes manifests on the embedded cluster",
                        (("scheduler.commands.simulate", "add_simulate_arguments"),)),
    "conf": Command("scheduler conf tools", (("scheduler.commands.cli", "add_conf_arguments"),),
                    needs=("scheduler.conf",)),
    "inspect": Command("show cluster state read from annotations",
                       (("scheduler.commands.inspect", "add_inspect_arguments"),
                        ("scheduler.commands.inspect_devices", "add_inspect_devices"),
                        ("scheduler.commands.inspect_dra", "add_inspect_dra"),
                        ("scheduler.commands.inspect_topology", "add_inspect_topology"))),
    "replay": Command("replay a GPU trace through the scheduler and measure fragmentation",
                      (("scheduler.commands.replay", "add_replay_arguments"),)),
    "device": Command("node-side device tools",
                      (("scheduler.commands.device", "add_device_arguments"),)),
    "node-agent": Command("serve this node's devices to kubelet and report them",
                          (("scheduler.commands.nodeagent", "add_node_agent_arguments"),),
                          needs=("scheduler.devices.node.agent", "kubernetes")),
    "top": Command("show a running scheduler's overview and queues in the terminal",
                   (("scheduler.commands.top", "add_top_arguments"),)),
    "run": Command("schedule pods on a Kubernetes cluster",
                   (("scheduler.commands.cli", "add_run_command"),),
                   needs=("scheduler.cluster.kube.run", "kubernetes")),
    "shard-controller": Command("split the nodes among schedulers as NodeShards",
                                (("scheduler.commands.shardcontroller",
                                  "add_shard_controller_arguments"),),
                                needs=("scheduler.cluster.kube.shardcontroller",)),
    "completion": Command("print a shell completion script (bash, zsh, tcsh or fish)",
                          (("scheduler.commands.cli", "add_completion_command"),),
                          needs=("shtab",)),
}


def _require(command: Command) -> None:
    for name in (*(module for module, _ in command.registrars), *command.needs):
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _run(args: argparse.Namespace) -> int:
    from scheduler.cluster.kube.run import run_main

    if not args.web_address:
        return run_main(args)
    from scheduler.web.publish import Publisher
    from scheduler.web.server import WebServer

    args.on_close = Publisher()
    server = WebServer(args.web_address, args.on_close).start()
    try:
        return run_main(args)
    finally:
        server.stop()


def add_run_command(sub: argparse._SubParsersAction) -> None:
    from scheduler.cluster.kube.flags import add_run_arguments

    run = sub.add_parser("run", help=COMMANDS["run"].help)
    add_run_arguments(run)
    run.set_defaults(func=_run)


def _conf_check(args: argparse.Namespace) -> int:
    from scheduler.commands.simulate import load_conf_warning
    from scheduler.conf import ConfError

    try:
        conf = load_conf_warning(args.conf)
    except ConfError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tiers = "; ".join(", ".join(p.name for p in tier) for tier in conf.tiers)
    print(f"{conf.source}: ok (actions: {', '.join(conf.actions)}; tiers: {tiers})")
    return 0


def add_conf_arguments(sub: argparse._SubParsersAction) -> None:
    conf = sub.add_parser("conf", help=COMMANDS["conf"].help)
    conf_sub = conf.add_subparsers(dest="conf_command", required=True)
    check = conf_sub.add_parser(
        "check", help="validate a scheduler conf and print what it resolved to",
        description="Validate a scheduler conf (Volcano format): print its warnings, then its "
        "actions and tiers. Exit status 2 when the conf cannot be used.")
    check.add_argument("conf", nargs="?", metavar="CONF",
                       help="conf file (default: the built-in conf)")
    check.set_defaults(func=_conf_check)


_FILE_METAVARS = frozenset({"FILE", "CONF", "PATH", "CSV", "FOLDER"})
_DIR_METAVARS = frozenset({"DIR"})


def _complete_paths(parser: argparse.ArgumentParser, *, files: object, dirs: object) -> None:
    """Mark every argument that names a file (or a directory) for shtab, so that the shell
    completes paths there instead of offering nothing (bash then only rings the bell)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _complete_paths(child, files=files, dirs=dirs)
        elif action.metavar in _FILE_METAVARS:
            action.complete = files  # type: ignore[attr-defined]
        elif action.metavar in _DIR_METAVARS:
            action.complete = dirs  # type: ignore[attr-defined]


def _completion(args: argparse.Namespace) -> int:
    import shtab

    if args.shell not in shtab.SUPPORTED_SHELLS:
        print(f"error: the installed shtab ({shtab.__version__}) writes no {args.shell} "
              "completion; upgrade it (pip install -U shtab)", file=sys.stderr)
        return 1
    parser = build_parser()
    _complete_paths(parser, files=shtab.FILE, dirs=shtab.DIRECTORY)
    sys.stdout.write(shtab.complete(parser, shell=args.shell))
    return 0


def add_completion_command(sub: argparse._SubParsersAction) -> None:
    completion = sub.add_parser(
        "completion", help=COMMANDS["completion"].help,
        description="Print a completion script for lahar. bash: "
        "'source <(lahar completion bash)', or save it in "
        "/etc/bash_completion.d/lahar; zsh: save 'lahar completion zsh' as _lahar in a folder "
        "of $fpath; fish: 'lahar completion fish > ~/.config/fish/completions/lahar.fish'. "
        "FILE and --conf complete file names.")
    completion.add_argument("shell", choices=("bash", "zsh", "tcsh", "fish"), help="the shell")
    completion.set_defaults(func=_completion)


def _command_of(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` names (its first word that is not an option), if any."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``lahar`` parser; with ``only``, that command's parser is complete and every other
    command has its name and help only (their modules are not imported)."""
    parser = argparse.ArgumentParser(
        prog="lahar",
        description="A Volcano-style batch scheduler "
        "for Kubernetes with GPU/RDMA/FPGA device sharing.",
    )
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        _require(command)
        if only is not None and name != only:
            sub.add_parser(name, help=command.help, add_help=False)
            continue
        for module, function in command.registrars:
            getattr(importlib.import_module(module), function)(sub)
    return parser


class _CurrentStderr:
    """Whatever ``sys.stderr`` is at write time: binding the stream object itself would keep
    logging into a stream that was swapped and closed (an embedding program, a test runner)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _valued_options(parser: argparse.ArgumentParser) -> set[str]:
    """The long options of ``parser`` and its subcommands that take one value."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _valued_options(sub)
        elif isinstance(action, argparse._StoreAction) and action.nargs is None:
            found.update(o for o in action.option_strings if o.startswith("--"))
    return found


def _negative_values_attached(words: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """``--flag -1s`` as ``--flag=-1s``: argparse takes a value that starts with ``-`` and is
    not a plain number for an option and says "expected one argument"; attached, the value
    reaches the flag's own check, which says what is wrong with it."""
    valued = _valued_options(parser)
    out: list[str] = []
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        following = words[i + 1] if i + 1 < len(words) else ""
        if word in valued and following[:1] == "-" and following[1:2].isdigit():
            out.append(f"{word}={following}")
            skip = True
        else:
            out.append(word)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(words)
    parser = build_parser(only=command or "")
    args = parser.parse_args(_negative_values_attached(words, parser))
    import structlog

    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(_CurrentStderr())  # type: ignore[arg-type]
    )
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print(f"\nlahar {command}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``lahar simulate -o yaml big.yaml | head``): stop quietly.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
