"""Schedule tables in PyTorch's pipeline CSV convention (``torch.distributed.pipelining``).

PyTorch writes a pipeline schedule as a CSV file with one row per rank and one cell per step;
a cell holds one action as ``<stage><type><microbatch>`` (``0F3`` = stage 0, forward,
microbatch 3; ``B`` = full backward, ``I`` = input gradient, ``W`` = weight gradient) and an
empty cell is an idle step. An overlapped pair is written as PyTorch prints it,
``(0F3;3B1)OVERLAP_F_B`` (forward of stage 0, microbatch 3 with the full backward of stage 3,
microbatch 1). The file has no header row; leading and trailing blanks around a
cell are ignored. Only the compute actions F, B, I, W and the pair are supported here (PyTorch's
communication and resharding actions such as ``SEND_F`` or ``UNSHARD`` are rejected). A file may
mix full and split backwards (PyTorch's DualPipeV does), each microbatch-stage one or the other.

:func:`write_csv` writes a table's rows (worker ``w`` → rank ``w``, one column per slot);
:func:`read_csv` reads such a file back into a validated :class:`~ppsweep.tables.table.ScheduleTable`,
inferring the stage-to-worker placement from where each microbatch's operations sit.
Rows and columns are counted from 0 in error messages (row = rank, column = step/slot).
"""

from __future__ import annotations

import csv
import io
import os
import re
import warnings
from typing import IO, Union

import numpy as np

from ppsweep.tables.ops import KIND_LETTER, LETTER_KIND, Kind, Op, dependencies, halves, pair
from ppsweep.schedules.base import ScheduleOrder
from ppsweep.tables.table import OrderDeadlockError, ScheduleTable, realize
from ppsweep.tables.validate import InvalidTableError, validate_table

PathOrFile = Union[str, os.PathLike, IO[str]]

#: One cell: stage index, computation type, microbatch index (all required).
_CELL = re.compile(r"(\d+)([FBIW])(\d+)")
_PAIR = re.compile(r"\((\d+F\d+);(\d+B\d+)\)OVERLAP_F_B")
_ACCEPTED = "<stage><F|B|I|W><microbatch> (e.g. 0F3) or (<stage>F<mb>;<stage>B<mb>)OVERLAP_F_B"


class CsvTableError(ValueError):
    """A CSV schedule that cannot be read into a valid table; the message is one line."""


def op_to_cell(op: Op) -> str:
    """PyTorch's action string of ``op``: ``<stage><kind letter><microbatch>``, e.g. ``0F3``; a pair ``(0F3;3B1)OVERLAP_F_B``."""
    if op.kind == Kind.FB:
        return "(" + ";".join(op_to_cell(half) for half in halves(op)) + ")OVERLAP_F_B"
    return f"{op.stage}{KIND_LETTER[op.kind]}{op.micro}"


def cell_to_op(text: str) -> Op | None:
    """The operation a cell names, None for an empty (idle) cell.

    Raises:
      ValueError: when the text is not ``<stage><F|B|I|W><microbatch>``.
    """
    text = text.strip()
    if not text:
        return None
    both = _PAIR.fullmatch(text)
    if both is not None:
        return pair(cell_to_op(both.group(1)), cell_to_op(both.group(2)))
    match = _CELL.fullmatch(text)
    if match is None:
        raise ValueError(f"cell {text!r} is not {_ACCEPTED}")
    stage, letter, micro = match.groups()
    return Op(LETTER_KIND[letter], int(micro), int(stage))


def table_rows(table: ScheduleTable) -> list[list[str]]:
    """The table as CSV cells: ``rows[w][t]`` is the op starting at slot ``t`` on worker ``w``.

    Idle slots and the continuation slots of multi-slot operations are empty strings.
    """
    rows = [[""] * table.length for _ in range(table.p)]
    for placed in table.placed_ops():
        rows[placed.worker][placed.start] = op_to_cell(placed.op)
    return rows


def write_csv(table: ScheduleTable, path_or_file: PathOrFile | None = None) -> str:
    """Write ``table`` in PyTorch's pipeline CSV convention and return the CSV text.

    One row per worker (row ``w`` = rank ``w``), one column per slot of the table, no header.
    The cell at slot ``t`` is the operation that *starts* at ``t`` (e.g. ``0F3``); the cell is
    empty for idle slots and also for the continuation slots of an operation lasting more than
    one slot (a B with ``b_slots=2`` shows in its first slot only). The file therefore keeps the
    table's timing, and reading it back with :func:`read_csv` (same ``f_slots``/``b_slots``)
    gives the same per-worker order and the same table.

    Args:
      table: the table to write.
      path_or_file: a path to create/overwrite, an open text file to write to, or None to
        only return the text.

    Returns:
      The CSV text (``\\r\\n`` line ends, as :mod:`csv` writes by default).
    """
    buffer = io.StringIO()
    csv.writer(buffer).writerows(table_rows(table))
    text = buffer.getvalue()
    if hasattr(path_or_file, "write"):
        path_or_file.write(text)  # type: ignore[union-attr]
    elif path_or_file is not None:
        with open(path_or_file, "w", newline="") as handle:  # type: ignore[arg-type]
            handle.write(text)
    return text


def read_csv(
    path_or_file: PathOrFile, *, name: str = "csv", f_slots: int = 1, b_slots: int = 2
) -> ScheduleTable:
    """Read a PyTorch pipeline CSV into a validated table.

    Each row is one worker's order (rank ``w`` = row ``w``); empty cells are skipped, so the
    columns only give the order and the table is re-timed as soon as possible
    (:func:`ppsweep.tables.table.realize`). The layout is inferred:

    - ``n_stages`` S = largest stage + 1, ``m`` = largest microbatch + 1;
    - a microbatch's path is the worker running each of its stages; distinct paths are
      replicas, numbered by first microbatch (replica 0 = path of microbatch 0);
    - stages are equal (``stage_fractions`` = 1/S);
    - the backward is split when I/W cells appear (then no B may appear).

    Args:
      path_or_file: a path or an open text file (opened with ``newline=""`` ideally).
      name: the table's schedule name.
      f_slots: slots a forward takes.
      b_slots: slots a full backward takes (I and W take half each).

    Returns:
      The valid table.

    Raises:
      CsvTableError: one line naming the row, column and cell (or the missing operation)
        and what is accepted; also for deadlocking orders and tables that fail validation.
    """
    order = read_csv_order(path_or_file, name=name)
    try:
        table = realize(order, f_slots, b_slots)
        validate_table(table)
    except (OrderDeadlockError, InvalidTableError) as exc:
        raise CsvTableError(_one_line(str(exc))) from exc
    except ValueError as exc:  # bad f_slots / b_slots
        raise CsvTableError(_one_line(str(exc))) from exc
    return table


def read_csv_order(path_or_file: PathOrFile, *, name: str = "csv") -> ScheduleOrder:
    """The per-worker order of a PyTorch pipeline CSV, with its inferred layout (see :func:`read_csv`).

    Raises:
      CsvTableError: as :func:`read_csv`, except that the order is not yet realized or validated.
    """
    orders, where = _undo_forward_shift(*_parse_rows(_read_rows(path_or_file)))
    order = _infer_order(name, orders, where)
    _check_runs(order, where)
    return order


def infer_order(orders: list[list[Op]], *, name: str = "custom") -> ScheduleOrder:
    """A :class:`ScheduleOrder` from per-worker operation lists, the layout inferred as for a CSV file.

    Args:
      orders: ``orders[w]`` is worker ``w``'s operations in order (pairs allowed).
      name: the schedule's name.

    Returns:
      The order (placement, replicas and split backward inferred; stages of equal size).

    Raises:
      CsvTableError: naming the first problem; "row r, column c" is worker ``r``, position ``c``.
    """
    where: dict[Op, tuple[int, int]] = {}
    for r, row in enumerate(orders):
        for c, op in enumerate(row):
            for half in halves(op):
                if half in where:
                    raise CsvTableError(f"row {r}, column {c}: {half} appears a second time (first at {where[half]})")
                where[half] = (r, c)
    if not where:
        raise CsvTableError("the schedule has no operations")
    order = _infer_order(name, [list(row) for row in orders], where)
    _check_runs(order, where)
    return order


# --- reading -------------------------------------------------------------------------------


def _read_rows(path_or_file: PathOrFile) -> list[list[str]]:
    where = "" if hasattr(path_or_file, "read") else f" {path_or_file}"
    try:
        if hasattr(path_or_file, "read"):
            rows = list(csv.reader(path_or_file))  # type: ignore[arg-type]
        else:  # utf-8-sig: a byte-order mark (spreadsheets write one) is not part of the first cell
            with open(path_or_file, newline="", encoding="utf-8-sig") as handle:  # type: ignore[arg-type]
                rows = list(csv.reader(handle))
    except (csv.Error, UnicodeDecodeError) as exc:
        raise CsvTableError(f"not a readable CSV file{where}: {_one_line(str(exc))} (expected UTF-8 text)") from None
    if rows and rows[0] and rows[0][0].startswith("\ufeff"):
        rows[0][0] = rows[0][0][1:]  # an open file that kept the byte-order mark
    while rows and not rows[-1]:
        rows.pop()  # trailing blank lines; blank lines in the middle and rows of empty cells are idle ranks
    if not rows:
        raise CsvTableError("empty CSV: expected one row per rank with cells like 0F3 (stage 0, forward, microbatch 3)")
    return rows


def _parse_rows(rows: list[list[str]]) -> tuple[list[list[Op]], dict[Op, tuple[int, int]]]:
    """Per-row orders and, for every op, its (row, column); rejects bad text and duplicates."""
    orders: list[list[Op]] = []
    where: dict[Op, tuple[int, int]] = {}
    for r, row in enumerate(rows):
        order = []
        for c, text in enumerate(row):
            try:
                op = cell_to_op(text)
            except ValueError as exc:
                raise CsvTableError(f"row {r}, column {c}: {exc}") from None
            if op is None:
                continue
            for half in halves(op):  # a pair is found under each of its halves
                if half in where:
                    r0, c0 = where[half]
                    raise CsvTableError(
                        f"row {r}, column {c}: cell {text.strip()!r} appears a second time "
                        f"(first at row {r0}, column {c0}); each operation must appear exactly once"
                    )
                where[half] = (r, c)
            order.append(op)
        orders.append(order)
    if not where:
        raise CsvTableError("CSV has no operations: expected cells like 0F3 (stage 0, forward, microbatch 3)")
    return orders, where


def _undo_forward_shift(
    orders: list[list[Op]], where: dict[Op, tuple[int, int]]
) -> tuple[list[list[Op]], dict[Op, tuple[int, int]]]:
    """PyTorch's known misprint undone, with a warning: ``Schedule1F1B`` numbers the forwards of its
    last rank from 1 (``F1 … Fm``; the counter of a rank without warm-up forwards starts late) while
    that rank runs ``F0 … F(m-1)``, as its backwards ``B0 … B(m-1)`` say. Where a stage's forwards
    are exactly ``1 … n`` and its backwards ``0 … n-1``, the forwards are read back one."""
    forwards: dict[int, set[int]] = {}
    backwards: dict[int, set[int]] = {}
    for op in where:
        if op.kind == Kind.F:
            forwards.setdefault(op.stage, set()).add(op.micro)
        elif op.kind in (Kind.B, Kind.I):
            backwards.setdefault(op.stage, set()).add(op.micro)
    shifted = {
        s for s, micros in forwards.items()
        if micros == set(range(1, len(micros) + 1)) and backwards.get(s) == set(range(len(micros)))
    }
    if not shifted:
        return orders, where

    def fix(op: Op) -> Op:
        return op._replace(micro=op.micro - 1) if op.kind == Kind.F and op.stage in shifted else op

    warnings.warn(
        f"stage(s) {sorted(shifted)}: forwards numbered from 1 (PyTorch's Schedule1F1B misprint on its last "
        "rank); read as numbered from 0, as that rank runs them",
        stacklevel=3,
    )
    return [[fix(op) for op in row] for row in orders], {fix(op): at for op, at in where.items()}


def _at(where: dict[Op, tuple[int, int]], op: Op) -> str:
    r, c = where[op]
    return f"row {r}, column {c}: cell {op_to_cell(op)!r}"


def _first_missing(present: set[int]) -> int | None:
    for i in range(len(present) + 1):
        if i not in present:
            return i if i < max(present) else None
    return None


def _infer_order(name: str, orders: list[list[Op]], where: dict[Op, tuple[int, int]]) -> ScheduleOrder:
    ops = list(where)
    split_at = {(op.micro, op.stage) for op in ops if op.kind in (Kind.I, Kind.W)}
    for op in sorted((op for op in ops if op.kind == Kind.B), key=lambda op: where[op]):
        if (op.micro, op.stage) in split_at:
            other = next(o for o in ops if o.kind in (Kind.I, Kind.W) and (o.micro, o.stage) == (op.micro, op.stage))
            raise CsvTableError(
                f"{_at(where, op)} is a full backward (B) but {_at(where, other)} splits the same "
                "microbatch-stage; use either B or I and W for each"
            )
    micros = {op.micro for op in ops}
    stages = {op.stage for op in ops}
    missing = _first_missing(micros)
    if missing is not None:
        raise CsvTableError(
            f"microbatch {missing} has no cell in any row but microbatch {max(micros)} does; "
            f"microbatches must be numbered 0 … m-1"
        )
    missing = _first_missing(stages)
    if missing is not None:
        raise CsvTableError(
            f"stage {missing} has no cell in any row but stage {max(stages)} does; "
            "stages must be numbered 0 … S-1"
        )
    m, n_stages = max(micros) + 1, max(stages) + 1
    split: bool | frozenset[tuple[int, int]] = bool(split_at)
    if split_at and len(split_at) < m * n_stages and any(op.kind == Kind.B for op in ops):
        split = frozenset(split_at)  # mixed: full and split backwards

    # The worker of every (microbatch, stage): all its operations must sit in one row.
    home: dict[tuple[int, int], Op] = {}
    for op in sorted(ops, key=lambda op: where[op]):
        key = (op.micro, op.stage)
        if key not in home:
            home[key] = op
        elif where[home[key]][0] != where[op][0]:
            first = home[key]
            raise CsvTableError(
                f"{_at(where, op)} is on rank {where[op][0]} but {_at(where, first)} puts stage "
                f"{op.stage} of microbatch {op.micro} on rank {where[first][0]}; all operations "
                "of one microbatch at one stage must be in the same row"
            )
    for j in range(m):
        for s in range(n_stages):
            needed = (Kind.F, Kind.I, Kind.W) if (j, s) in split_at else (Kind.F, Kind.B)
            if (j, s) not in home:
                raise CsvTableError(
                    f"microbatch {j} has no cell at stage {s} in any row (e.g. {op_to_cell(Op(Kind.F, j, s))!r}); "
                    f"every microbatch needs {'/'.join(k.name for k in needed)} at every stage 0 … {n_stages - 1}"
                )
            for kind in needed:
                op = Op(kind, j, s)
                if op not in where:
                    row = where[home[(j, s)]][0]
                    raise CsvTableError(
                        f"row {row}: cell {op_to_cell(op)!r} is missing ({_at(where, home[(j, s)])} is there); "
                        f"every microbatch needs {'/'.join(k.name for k in needed)} at every stage"
                    )

    # Paths → replicas, in order of first microbatch.
    replica_of_path: dict[tuple[int, ...], int] = {}
    micro_replica = np.zeros(m, dtype=np.int64)
    for j in range(m):
        path = tuple(where[home[(j, s)]][0] for s in range(n_stages))
        micro_replica[j] = replica_of_path.setdefault(path, len(replica_of_path))
    placement = np.asarray(list(replica_of_path), dtype=np.int64).reshape(len(replica_of_path), n_stages)
    return ScheduleOrder(
        name=name,
        p=len(orders),
        m=m,
        n_stages=n_stages,
        orders=tuple(tuple(order) for order in orders),
        placement=placement,
        micro_replica=micro_replica,
        stage_fractions=np.full(n_stages, 1.0 / n_stages),
        split_backward=split,
        options={},
    )


def _check_runs(order: ScheduleOrder, where: dict[Op, tuple[int, int]]) -> None:
    """Raise naming the first stuck cell when the per-row orders can never all run."""
    done: set[Op] = set()
    cursor = [0] * order.p
    progressed = True
    while progressed:
        progressed = False
        for w, row in enumerate(order.orders):
            while cursor[w] < len(row):
                op = row[cursor[w]]
                if any(dep not in done for dep in dependencies(op, order.n_stages, order.split_backward)):
                    break
                done.update(halves(op))
                cursor[w] += 1
                progressed = True
    stuck = [row[cursor[w]] for w, row in enumerate(order.orders) if cursor[w] < len(row)]
    if stuck:
        op = min(stuck, key=lambda op: where[halves(op)[0]])
        dep = next(d for d in dependencies(op, order.n_stages, order.split_backward) if d not in done)
        raise CsvTableError(
            f"{_at(where, halves(op)[0])} can never run: the rows deadlock (its input {op_to_cell(dep)!r} at "
            f"row {where[dep][0]}, column {where[dep][1]} is never reached); "
            "each row must be an order in which every input runs first"
        )


def _one_line(message: str) -> str:
    return " ".join(message.split())


__all__ = ["CsvTableError", "cell_to_op", "infer_order", "op_to_cell", "read_csv", "read_csv_order", "table_rows", "write_csv"]
