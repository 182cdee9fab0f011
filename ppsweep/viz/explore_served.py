"""The explorer served from a Bokeh server: stores past the page's embedding limit.

``python -m ppsweep.explore STORE`` serves a store of more than :data:`~ppsweep.viz.explore.MAX_VALUES`
values of ``t_sim`` this way (``--serve`` forces it for any store). The page is the static page's
(:func:`~ppsweep.viz.explore.build_page`: the same figures, selectors, colours and script); only
its data differs. The static page embeds :func:`~ppsweep.viz.explore.page_data` of the whole
store; here the store stays opened lazily with dask (:func:`ppsweep.analysis.load`), and whenever a
selector changes the server computes ``page_data`` of the part of the store the selection needs
(:func:`selection_part`) and sends it; the page's script then redraws from it as the static page does.

A selection's part is the selected value of every dimension but

- ``bandwidth`` and ``latency`` (the winner map): at most :data:`MAP_CELLS` values each, evenly
  spread over the store's and always including the selected one (the map's cells widen to cover
  the values between; the step-time line along either of them has the same points);
- the step-time panel's x axis and ``sample``: all of their values.

So a selection reads the zarr chunks of one ``(p, m)`` unit (of every ``(p, m)`` unit along an x
axis of ``p`` or ``m``), never the whole store.
"""

from __future__ import annotations

import html
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ppsweep.cli.support import UsageError
from ppsweep.store.errors import StoreError
from ppsweep.store.open import open_store
from ppsweep.store.units import damaged_units, describe_units, done_units
from ppsweep.viz.explore import MAP_DIMS, _legend_html, build_page, coordinates, page_data, serve_until_stopped

#: At most this many values of bandwidth, and of latency, on the served page's winner map.
MAP_CELLS = 160


def spread(values: np.ndarray, cells: int, keep: int) -> list[int]:
    """Indices of at most ``cells`` of ``values`` evenly spread over their sorted order, plus ``keep``; in store order."""
    order = np.argsort(np.asarray(values, dtype=float), kind="stable")
    positions = np.unique(np.round(np.linspace(0, len(order) - 1, min(cells, len(order)))).astype(int))
    return sorted({int(k) for k in order[positions]} | {int(keep)})


def selection_part(dataset: xr.Dataset, selection: Mapping[str, int], x: str, cells: int = MAP_CELLS) -> xr.Dataset:
    """The part of ``dataset`` the page needs to show ``selection`` (lazy: nothing is read here).

    Args:
      dataset: a results dataset (lazily loaded).
      selection: the selected index of every grid dimension (``t_sim``'s dimensions but ``schedule``).
      x: the step-time panel's x axis.
      cells: at most this many values of each map dimension.

    Returns:
      ``dataset`` restricted to the selected value of each dimension, all values of ``x`` and
      ``sample``, and spread values of the map dimensions (module docstring).
    """
    index: dict[str, Any] = {}
    for dim in dataset["t_sim"].dims[1:]:
        if dim in MAP_DIMS:
            index[dim] = spread(dataset[dim].values, cells, selection[dim])
        elif dim != x and dim != "sample":
            index[dim] = [selection[dim]]
    return dataset.isel(index)


class UnitCheck:
    """Checks each finished ``(p, m)`` unit of a store against its checksum the first time a part reads it
    (what :func:`ppsweep.store.open.open_results` does for every unit at once)."""

    def __init__(self, store: str | os.PathLike) -> None:
        self.store = Path(store)
        self.group = open_store(self.store)
        self.done = done_units(self.group)
        self.p = [int(v) for v in self.group["p"][...]]
        self.m = [int(v) for v in self.group["m"][...]]
        self.checked: set[tuple[int, int]] = set()

    def __call__(self, part: xr.Dataset) -> None:
        """Raise :class:`StoreError` naming the damaged units among those ``part`` reads."""
        units = [(self.p.index(int(p)), self.m.index(int(m))) for p in part["p"].values for m in part["m"].values]
        new = [u for u in units if u not in self.checked and self.done[u]]
        damaged = damaged_units(self.group, new)
        if damaged:
            raise StoreError(
                f"{self.store}: damaged units {describe_units(self.group, damaged)} (their chunks do not match their checksum); "
                f"python -m ppsweep.verify {self.store} --repair recomputes them"
            )
        self.checked.update(new)


def served_document(document: Any, dataset: xr.Dataset, title: str, check: Callable[[xr.Dataset], None] | None = None) -> None:
    """Fill a Bokeh server session's ``document`` with the page, and recompute its data as selectors change.

    Args:
      document: the session's document.
      dataset: the results dataset, opened lazily.
      title: the page's title.
      check: called with each part before it is read (:class:`UnitCheck`); a
        :class:`~ppsweep.store.errors.StoreError` it raises is shown on the page instead of the part.
    """
    dims = list(dataset["t_sim"].dims[1:])
    labels = coordinates(dataset, dims)["labels"]
    check = check or (lambda part: None)
    first = selection_part(dataset, dict.fromkeys(dims, 0), "bandwidth")
    try:
        check(first)
    except StoreError as error:
        from bokeh.models import Div

        document.add_root(Div(text=_error_html(error), name="status"))
        return
    build_page(dataset, title, data=page_data(first), document=document)
    selects = {d: document.select_one({"name": f"select_{d}"}) for d in dims}
    xaxis = document.select_one({"name": "select_x"})
    holder = document.select_one({"name": "page_data"})
    legend = document.select_one({"name": "legend"})
    pending = [False]

    def refresh() -> None:
        pending[0] = False
        selection = {d: labels[d].index(selects[d].value) if selects[d].value in labels[d] else 0 for d in dims}
        part = selection_part(dataset, selection, xaxis.value)
        try:
            check(part)
        except StoreError as error:
            document.select_one({"name": "status"}).text = _error_html(error)
            return
        data = page_data(part)
        holder.data = data
        legend.text = _legend_html(data)

    def changed(attr: str, old: Any, new: Any) -> None:
        # Selectors set together (the address's selection) cost one recomputation.
        if not pending[0]:
            pending[0] = True
            document.add_next_tick_callback(refresh)

    for widget in [*selects.values(), xaxis]:
        widget.on_change("value", changed)
    if xaxis.value != "bandwidth":  # the first part was cut for x = bandwidth
        refresh()


def _error_html(error: Exception) -> str:
    return f"<b style='color:#C44E52'>error: {html.escape(str(error))}</b>"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(dataset: xr.Dataset, title: str, port: int = 0, store: str | os.PathLike | None = None) -> Any:
    """A started Bokeh server of the page of ``dataset`` on ``http://127.0.0.1:PORT/`` (on the current thread's IO loop).

    Args:
      dataset: a results dataset, opened lazily (:func:`ppsweep.analysis.load`).
      title: the page's title.
      port: the port (0: any free one; the server's ``port`` says which).
      store: the store's path: each unit is checked against its checksum as a selection first reads
        it (:class:`UnitCheck`); None: no check.

    Returns:
      The :class:`bokeh.server.server.Server`; ``server.io_loop.start()`` runs it.

    Raises:
      UsageError: the port is taken.
    """
    from bokeh.application import Application
    from bokeh.application.handlers.function import FunctionHandler
    from bokeh.server.server import Server

    port = port or _free_port()
    check = UnitCheck(store) if store is not None else None
    app = Application(FunctionHandler(lambda document: served_document(document, dataset, title, check)))
    origins = [f"127.0.0.1:{port}", f"localhost:{port}"]
    try:
        server = Server({"/": app}, address="127.0.0.1", port=port, allow_websocket_origin=origins, num_procs=1)
    except OSError as error:
        raise UsageError(f"--port: cannot listen on 127.0.0.1:{port} ({error.strerror or error}); choose another port") from None
    server.start()
    return server


def serve_store(dataset: xr.Dataset, title: str, port: int, open_browser: bool = True, store: str | os.PathLike | None = None) -> None:
    """Serve the page of ``dataset`` (:func:`start_server`) until interrupted (Ctrl-C or SIGTERM); ``open_browser``: open it in a browser."""
    server = start_server(dataset, title, port, store)
    serve_until_stopped(f"http://127.0.0.1:{server.port}/", "Bokeh server, each selection read from the store on demand; ",
                        open_browser, server.io_loop.start, server.stop)
