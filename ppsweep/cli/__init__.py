"""The command line: ``python -m ppsweep +sweep=NAME`` (:mod:`~ppsweep.cli.main`), ``python -m
ppsweep.analyze STORE`` (:mod:`~ppsweep.cli.analyze`: the analysis as text and figures) and the
plumbing the commands share (:mod:`~ppsweep.cli.support`: one-line errors, exit status 2, paths).
"""
