"""The seed paper's reproduction (``scripts/reproduce_paper.py`` is its entry point).

Seed paper: "A Tabular Schedule Abstraction for Communication-Aware Evaluation of Pipeline-Parallel
LLM Training" (Barley, Leis, Klenk, Fröning, ISPDC 2026).

Modules:
  systems   the paper's nine systems as a dataclass;
  claims    the paper's claims as data (quantity, paper value, comparison, tolerance);
  sweeps    the sweeps through the config path, and single-assumption runs;
  findings  one function per finding, returning its tables and measured numbers;
  verdict   the one function that turns claims and measured numbers into verdicts;
  output    markdown tables and the per-finding CSV/markdown files;
  figures   the PNG figures;
  report    REPORT.md from ``report.md.tmpl``;
  reproduce all of it, in order (``reproduce.run``).

Beside it, ``zero_bubble`` holds another paper's published tables against ppsweep: the zero-bubble
paper's Table 5 from its Table 9 inputs, and its Table 4 throughput (``scripts/zero_bubble_paper.py``).
"""
