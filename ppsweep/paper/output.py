"""Markdown tables and the per-finding files (``<stem>.md``, ``<stem>.csv``) of results/paper/."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def pct(a, b):
    """``100 · (a / b − 1)``: negative where ``a`` is smaller (faster)."""
    return 100.0 * (np.asarray(a, dtype=float) / np.asarray(b, dtype=float) - 1.0)


def markdown(df: pd.DataFrame, floatfmt: str = "{:.2f}", index: bool = True) -> str:
    """A pipe table (no tabulate dependency); NaN prints as "—".

    Args:
      df: the table.
      floatfmt: format of float cells.
      index: print the index as the first column(s).
    """
    frame = df.reset_index() if index else df
    cols = [str(c) for c in frame.columns]

    def cell(x):
        if isinstance(x, (float, np.floating)):
            return "—" if np.isnan(x) else floatfmt.format(x)
        return str(x)

    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def fmt_range(values, unit: str = " %") -> str:
    """``min … max`` with signs, one decimal."""
    v = np.asarray(list(values), dtype=float)
    return f"{np.nanmin(v):+.1f} … {np.nanmax(v):+.1f}{unit}"


def write_tables(out: Path, stem: str, title: str, csv: pd.DataFrame, sections: list[tuple[str, str]]) -> None:
    """Write ``<stem>.csv`` (every mode and point) and ``<stem>.md`` (the sections' markdown tables).

    Args:
      out: output directory.
      stem: file stem, e.g. ``f1_gpipe_vs_1f1b``.
      title: the markdown page's title.
      csv: the long table.
      sections: ``(heading, markdown table)`` pairs.
    """
    out.mkdir(parents=True, exist_ok=True)
    csv.to_csv(out / f"{stem}.csv", index=False, float_format="%.6g")
    body = f"# {title}\n\nCSV: `{stem}.csv` (all modes and points). Figure: `{stem}.png`.\n\n"
    body += "\n".join(f"### {heading}\n\n{table}" for heading, table in sections)
    (out / f"{stem}.md").write_text(body)
