"""``python -m ppsweep.explore STORE``: the explorer's command — a self-contained page
(:mod:`ppsweep.viz.explore`, ``--html`` or served from memory) or, past
:data:`~ppsweep.viz.explore.MAX_VALUES` values or with ``--serve``, a Bokeh server that reads each
selection on demand (:mod:`ppsweep.viz.explore_served`). Bad input: one ``error:`` line, exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from ppsweep.cli.support import UsageError, command_parser, run_command
from ppsweep.viz.explore import MAX_VALUES, _check_size, one_layout, page_html, select_part, serve


def _parser() -> argparse.ArgumentParser:
    parser = command_parser("explore", "An interactive page of a ppsweep results store: winner map, step time, memory, P(win) and regret.",
                            "results/bandwidth.zarr --html bandwidth.html", store=True)
    parser.add_argument("--html", metavar="FILE", help="write a self-contained page to FILE instead of serving it")
    parser.add_argument("--port", type=int, default=5006, help="port to serve on (default 5006; 0: any free port)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser when serving")
    parser.add_argument("--serve", action="store_true",
                        help=f"serve from a Bokeh server that reads each selection from the store on demand (automatic past {MAX_VALUES:,} values)")
    parser.add_argument("--sel", action="append", default=[], metavar="DIM=VALUE[,VALUE...]", help="keep only these values of a dimension (repeatable)")
    return parser


def run(argv: list[str] | None = None) -> str:
    """Everything but printing errors: writes or serves the page; returns the text to print."""
    from ppsweep.analysis import load
    from ppsweep.store.errors import IncompleteStoreWarning

    args = _parser().parse_args(argv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IncompleteStoreWarning)
        dataset = load(args.store, verify=False)  # checked below: all at once, or unit by unit when served
    for w in caught:
        if issubclass(w.category, IncompleteStoreWarning):
            print(f"warning: {w.message}", file=sys.stderr)
    if args.serve and args.html:
        raise UsageError("--serve: a served page cannot be written to a file; drop --html or --serve")
    dataset = one_layout(select_part(dataset, args.sel))
    title = f"ppsweep explorer: {Path(args.store).name}"
    if args.serve or (not args.html and dataset["t_sim"].size > MAX_VALUES):
        from ppsweep.viz.explore_served import serve_store

        serve_store(dataset, title, args.port, open_browser=not args.no_browser, store=args.store)
        return "stopped"
    _check_size(dataset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IncompleteStoreWarning)  # said above
        dataset = one_layout(select_part(load(args.store), args.sel))  # every unit checked against its checksum
    html = page_html(dataset, title)
    if args.html:
        path = Path(args.html)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(html, encoding="utf-8")
        except OSError as error:
            raise UsageError(f"--html: cannot write {path}: {error.strerror or error}") from None
        return f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB, self-contained)"
    serve(html, args.port, open_browser=not args.no_browser)
    return "stopped"


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (0, or 2 after one ``error:`` line on stderr)."""
    from ppsweep.analysis import AnalysisError

    return run_command(lambda: run(argv), (AnalysisError,))


if __name__ == "__main__":
    sys.exit(main())
