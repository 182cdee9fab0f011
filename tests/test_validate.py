"""Each branch of the table validator (SPEC §2), on GPipe at p = 2, m = 2:

    w0  | F0 F1 .  .  .  B0 ·  B1 ·
    w1  | .  F0 F1 B0 ·  B1 ·  .  .
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ppsweep import InvalidTableError, Kind, build_schedule, validate_table


@pytest.fixture()
def gpipe():
    return build_schedule("gpipe", 2, 2)


def changed(table, **cells):
    """``table`` with cells changed: ``kind={(w, t): value}`` etc."""
    arrays = {}
    for name, edits in cells.items():
        array = getattr(table, name).copy()
        for (w, t), value in edits.items():
            array[w, t] = value
        arrays[name] = array
    return dataclasses.replace(table, **arrays)


def test_the_table_itself_is_valid(gpipe):
    validate_table(gpipe)


def test_wrong_kind(gpipe):
    # A full-backward table has no I: F0 on worker 0 turned into I(0, 0).
    with pytest.raises(InvalidTableError, match=r"^worker 0, slot 0, operation I\(mb=0, stage=0\): kind I not allowed here \(expected F/B\)$"):
        validate_table(changed(gpipe, kind={(0, 0): Kind.I}))
    # A split-backward table has no B.
    split = dataclasses.replace(gpipe, split_backward=True)
    with pytest.raises(InvalidTableError, match=r"^worker 1, slot 3, operation B\(mb=0, stage=1\): kind B not allowed here \(expected F/I/W\)$"):
        validate_table(split)


@pytest.mark.parametrize("name, value", [("micro", 2), ("micro", -1), ("stage", 2)])
def test_out_of_range(gpipe, name, value):
    with pytest.raises(InvalidTableError, match=r"^worker 0, slot 1, .*: microbatch must be in \[0, 2\) and stage in \[0, 2\)$"):
        validate_table(changed(gpipe, **{name: {(0, 1): value}}))


def test_replica_cell(gpipe):
    with pytest.raises(InvalidTableError, match=r"^worker 1, slot 1, operation F\(mb=0, stage=1\): replica cell must be 0, the microbatch's replica$"):
        validate_table(changed(gpipe, replica={(1, 1): 1}))


def test_shapes(gpipe):
    with pytest.raises(InvalidTableError, match=r"^kind must have shape \(p=2, T\), got \(3, 9\)$"):
        validate_table(dataclasses.replace(gpipe, kind=np.zeros((3, 9), dtype=gpipe.kind.dtype)))
    with pytest.raises(InvalidTableError, match=r"^stage has shape \(2, 8\), kind has \(2, 9\)$"):
        validate_table(dataclasses.replace(gpipe, stage=gpipe.stage[:, :8]))


@pytest.mark.parametrize("code", [9, -3])
def test_unknown_code(gpipe, code):
    with pytest.raises(InvalidTableError, match=rf"^worker 0, slot 2: unknown kind code {code}$"):
        validate_table(changed(gpipe, kind={(0, 2): code}))
