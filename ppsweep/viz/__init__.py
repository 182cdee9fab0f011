"""Looking at results: figures, traces, the interactive page, one table shown.

- :mod:`~ppsweep.viz.plots`: PNG figures of stores and Gantt charts; :mod:`~ppsweep.viz.display`
  their shared helpers.
- :mod:`~ppsweep.viz.trace`: ``python -m ppsweep.trace``, simulated steps as Perfetto traces.
- :mod:`~ppsweep.viz.explore`: ``python -m ppsweep.explore``, the Bokeh page.
- :mod:`~ppsweep.viz.show`: ``python -m ppsweep.show``, one table printed.
"""
