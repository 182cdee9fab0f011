"""Sweeps: a Hydra config to a grid of points, cut into units of work, evaluated and written.

- :mod:`~ppsweep.sweep.config`: the one config path (``SweepSpec``, ``load_config``, ``load_plan``).
- :mod:`~ppsweep.sweep.evaluate`: one unit of work at the three levels (formula, table, simulation).
- :mod:`~ppsweep.sweep.ranking`: ranks of schedules at each point.
- :mod:`~ppsweep.sweep.runner`: the locking loop that evaluates units and writes them;
  :mod:`~ppsweep.sweep.parallel` runs units in spawned processes; :mod:`~ppsweep.sweep.shards`
  splits a sweep across jobs.
- :mod:`~ppsweep.sweep.estimate`, :mod:`~ppsweep.sweep.progress`, :mod:`~ppsweep.sweep.timing`:
  what a sweep will cost, how far it is, where its time went.
"""
