"""Shared plumbing of ppsweep's commands (sweep, show, trace, analyze): one-line errors, exit 2, paths.

(The sweep command itself is :mod:`ppsweep.cli.main`.)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Callable, Iterator, NoReturn


class UsageError(Exception):
    """Bad command-line input; the message is the one line shown after ``error:``."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors raise :class:`UsageError` instead of printing usage."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


#: Help of the positional ``store`` argument of the commands that read a results store.
STORE_HELP = "a results store written by python -m ppsweep (results/<name>.zarr)"


def command_parser(module: str, description: str, example: str | None = None, *, store: bool = False) -> OneLineParser:
    """The parser of ``python -m ppsweep.<module>``: one-line errors, no abbreviated options.

    Args:
      module: the command's module name after ``ppsweep.`` (``analyze``, ``verify``, ...).
      description: one sentence on what the command does.
      example: the arguments of an example command line, shown after ``--help`` (None: none).
      store: whether the first positional argument is a results store.
    """
    prog = f"python -m ppsweep.{module}"
    epilog = None if example is None else f"example: {prog} {example}"
    parser = OneLineParser(prog=prog, allow_abbrev=False, description=description, epilog=epilog)
    if store:
        parser.add_argument("store", help=STORE_HELP)
    return parser


def run_command(produce: Callable[[], str], errors: tuple[type[BaseException], ...] = ()) -> int:
    """Run a command's body and print its text; return the exit status.

    Args:
      produce: builds the command's output text (parsing included).
      errors: exception types that mean bad input, besides :class:`UsageError`.

    Returns:
      0 after printing the text; 2 after one ``error: ...`` line on stderr; argparse's own
      status for ``--help``.
    """
    try:
        text = produce()
    except SystemExit as exc:  # --help (an int or None), or a one-line error raised deeper (a string)
        return _system_exit_status(exc)
    except (UsageError, *errors) as exc:
        return _error(exc)
    return print_quietly(text)


def print_quietly(text: str) -> int:
    """Print ``text`` on stdout; a reader that went away (``| head``) ends the command quietly, status 0."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # Point stdout at /dev/null so that the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _system_exit_status(exc: SystemExit) -> int:
    """The status of a ``SystemExit``: its own code; a string (a message) is printed as one line, status 2."""
    if isinstance(exc.code, str):
        message = " ".join(exc.code.split())
        print(message if message.startswith("error:") else f"error: {message}", file=sys.stderr)
        return 2
    return exc.code or 0


def check_arguments(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int | None:
    """Parse ``argv`` only to answer bad arguments and ``--help`` early (before heavy imports).

    Returns:
      None when the arguments parse; else the exit status, after the help text or one
      ``error: ...`` line (2).
    """
    try:
        parser.parse_args(argv)
    except SystemExit as exc:  # --help
        return _system_exit_status(exc)
    except UsageError as exc:
        return _error(exc)
    return None


def _error(exc: BaseException) -> int:
    message = " ".join(str(exc).split()) or type(exc).__name__
    print(f"error: {message}", file=sys.stderr)
    return 2


def display(path: Path) -> str:
    """``path`` relative to the current directory when it is below it (shorter messages)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def exit_with(status: int, line: str) -> NoReturn:
    """Print ``line`` on stderr and exit with ``status`` (the one-line end of a failed command)."""
    print(line, file=sys.stderr, flush=True)
    sys.exit(status)


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[None]:
    """While inside: Ctrl-C (SIGINT) and SIGTERM raise :class:`KeyboardInterrupt` in the main thread,
    whatever this process inherited (a shell's background job, a script, starts Python with SIGINT
    ignored, and then Ctrl-C or ``kill -INT`` would never reach a server). Restores the handlers after."""

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
