"""Old name of :mod:`ppsweep.cli_support`; kept until ``ppsweep/trace.py`` imports the new name."""

from ppsweep.cli_support import OneLineParser, UsageError, run_command

__all__ = ["OneLineParser", "UsageError", "run_command"]
