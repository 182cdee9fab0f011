"""Measurements held against ppsweep's predictions (issue 26).

- :mod:`~ppsweep.measure.calibrate`: per-stage F/B/I/W times and message costs fitted from a
  Chrome/Perfetto trace (PyTorch's profiler or ppsweep's own), written as a profiled-costs file.
  It never imports torch.
- :mod:`~ppsweep.measure.torch_runtime`: runs PyTorch's ``torch.distributed.pipelining`` schedules
  for real (spawned gloo processes on this machine), measures step times, records profiler traces
  and predicts the same steps with ppsweep. torch is imported lazily (the ``validate`` extra).
"""
