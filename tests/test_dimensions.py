"""The point dimensions' registry (ppsweep/sweep/dimensions.py) drives the config, the coordinates and the grid."""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep.analysis.sensitivity import NUMERIC_AXES
from ppsweep.sweep.config import FREE_KEYS, SYSTEM_FIELD_AXES, known_keys, load_config
from ppsweep.sweep.dimensions import DIMENSIONS, POINT_DIMENSION_NAMES, POINT_DIMENSIONS, grid_arguments
from ppsweep.sweep.evaluate import ENGINE_DIMS
from ppsweep.viz.display import format_coordinate

#: Two accepted values of every point dimension (a new dimension gets its own here).
VALUES = {"compute": [1.0e14, 1.0e15], "bandwidth": [1.0e9, 1.0e11], "latency": [1.0e-7, 1.0e-5]}


def test_the_registry_is_the_store_order_units_and_keys():
    names = list(DIMENSIONS)
    assert names[names.index("comm") + 1:] == [*POINT_DIMENSION_NAMES, "sample"]
    assert set(VALUES) == set(POINT_DIMENSION_NAMES)
    for d in POINT_DIMENSIONS:
        assert DIMENSIONS[d.name] == d.units
        assert d.name in FREE_KEYS and d.name in known_keys() and SYSTEM_FIELD_AXES[d.system_field] == d.name
        assert d.name in ENGINE_DIMS and d.name in NUMERIC_AXES
    assert ENGINE_DIMS == ("comm", *POINT_DIMENSION_NAMES, "sample")
    assert format_coordinate("bandwidth", 1e10) == "10 GB/s" and format_coordinate("compute", 5e14) == "500 TFLOP/s"


def test_every_dimension_becomes_a_coordinate_in_registry_order():
    spec = load_config(["+sweep=bandwidth", "p=[4]", "m=[8]", *(f"{k}={v}" for k, v in VALUES.items())])
    coords = spec.coords()
    assert [d for d in coords if d in POINT_DIMENSION_NAMES] == list(POINT_DIMENSION_NAMES)
    for d in POINT_DIMENSIONS:
        assert coords[d.name].dtype == d.dtype and coords[d.name].tolist() == VALUES[d.name]
    assert spec.point_dims[-len(POINT_DIMENSIONS):] == POINT_DIMENSION_NAMES
    # null: the system's value; only the ``always`` dimensions stay (one value)
    plain = load_config(["+sweep=bandwidth", "p=[4]", "m=[8]", "bandwidth=null"])
    for d in POINT_DIMENSIONS:
        assert (d.name in plain.coords()) == d.always
    assert plain.bandwidth.tolist() == [plain.system.bandwidth]


def test_grid_arguments_put_each_dimension_on_its_own_axis():
    spec = load_config(["+sweep=bandwidth", "p=[4]", "m=[8]", *(f"{k}={v}" for k, v in VALUES.items())])
    grid = grid_arguments(POINT_DIMENSIONS, {d.name: getattr(spec, d.name) for d in POINT_DIMENSIONS}, spec.system)
    k = len(POINT_DIMENSIONS)
    for axis, d in enumerate(POINT_DIMENSIONS):
        value = grid[d.reaches]
        if d.stage:  # the per-stage costs' leading axis
            assert axis == 0 and np.array_equal(value, VALUES[d.name])
        else:
            assert value.shape == tuple(2 if a == axis else 1 for a in range(k)) and value.ravel().tolist() == VALUES[d.name]
    none = grid_arguments(POINT_DIMENSIONS, {}, spec.system)  # absent: the system's value, one point
    for d in POINT_DIMENSIONS:
        assert none[d.reaches] is None if d.stage else none[d.reaches].ravel().tolist() == [getattr(spec.system, d.system_field)]


@pytest.mark.parametrize("dim", POINT_DIMENSIONS, ids=lambda d: d.name)
@pytest.mark.parametrize("bad", ["[-1.0e30]", "[1.0e30]", "abc"])
def test_a_bad_value_names_the_key_and_its_accepted_range(dim, bad):
    if bad == "[1.0e30]" and dim.bounds[1] == np.inf:
        pytest.skip("no upper bound")
    with pytest.raises(ValueError) as error:
        load_config(["+sweep=bandwidth", "p=[4]", "m=[8]", f"{dim.name}={bad}"])
    message = str(error.value)
    assert message.startswith(f"{dim.name}: ") and "\n" not in message
    assert f"{dim.bounds[0]:g}" in message and (dim.bounds[1] == np.inf or f"{dim.bounds[1]:g}" in message), message
