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
VALUES = {"compute": [1.0e14, 1.0e15], "bandwidth": [1.0e9, 1.0e11], "latency": [1.0e-7, 1.0e-5], "fb_overlap": [0.0, 0.5]}


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


# ---- fb_overlap: the dimension added through the registry ----------------------------------------
#: A tiny sweep through the command's own run on Hydra's composed config (as ``python -m ppsweep``).
FB_GRID = ["p=[4]", "m=[8]", "schedules=[dualpipe,1f1b]", "progress=false", "engine.compilation_cache=null", "engine.workers=1"]
FB_VALUES = (0.0, 0.5, 1.0)


def _sweep(out, name: str, *overrides: str):
    import xarray as xr

    from ppsweep.cli.main import run
    from ppsweep.sweep.config import compose_config

    assert run(compose_config([*FB_GRID, f"results_dir={out}", f"name={name}", *overrides])) == 0
    return xr.open_zarr(out / f"{name}.zarr", consolidated=False)


@pytest.fixture(scope="module")
def fb_stores(tmp_path_factory):
    out = tmp_path_factory.mktemp("fb_overlap")
    axis = "fb_overlap=[0,0.5,1]"
    return {
        "axis": _sweep(out, "axis", axis, "engine.method=scan"),
        "axis_auto": _sweep(out, "axis_auto", axis),
        **{v: _sweep(out, f"scalar{v}", f"system.fb_overlap={v}", "engine.method=scan") for v in FB_VALUES},
    }


def test_an_fb_overlap_axis_equals_the_scalar_at_each_value(fb_stores):
    axis = fb_stores["axis"]
    assert axis.t_sim.dims[-1] == "fb_overlap" and axis.fb_overlap.attrs["units"] == "share"
    assert axis.fb_overlap.values.tolist() == list(FB_VALUES)
    for v in FB_VALUES:
        scalar = fb_stores[v]
        assert "fb_overlap" not in scalar.dims
        for var in ("t_sim", "comm_time", "rank_sim"):  # the scan's values, to the bit
            assert np.array_equal(axis[var].sel(fb_overlap=v).values, scalar[var].values, equal_nan=True), (v, var)
        # as on every axis: idle_sim's compute sum (a matrix product over the grid's points) and the
        # envelope (engine.method=auto, features reduced over the grid) round by the grid, within 1e-12
        np.testing.assert_allclose(axis.idle_sim.sel(fb_overlap=v).values, scalar.idle_sim.values, rtol=1e-12)
        np.testing.assert_allclose(fb_stores["axis_auto"].t_sim.sel(fb_overlap=v).values, scalar.t_sim.values, rtol=1e-12)


def test_fb_overlap_moves_dualpipe_but_not_1f1b_which_has_no_pairs(fb_stores):
    from ppsweep.tables.build import build_schedule

    assert build_schedule("1f1b", 4, 8).pair_micro is None and build_schedule("dualpipe", 4, 8).pair_micro is not None
    t = fb_stores["axis"].t_sim.sel(p=4, m=8).squeeze()
    dualpipe, one_f_one_b = t.sel(schedule="dualpipe").values, t.sel(schedule="1f1b").values
    assert np.all(np.diff(dualpipe) < 0)  # more of each pair's forward hidden: a shorter step
    assert np.all(one_f_one_b == one_f_one_b[0])


@pytest.mark.parametrize("bad", ["fb_overlap=[1.5]", "fb_overlap=[-0.1]", "fb_overlap=abc", "fb_overlap=[0,abc]"])
def test_a_bad_fb_overlap_is_one_line_before_any_work(tmp_path, capsys, bad):
    from ppsweep.cli.main import run
    from ppsweep.sweep.config import compose_config

    assert run(compose_config([*FB_GRID, f"results_dir={tmp_path}", "name=bad", bad])) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: fb_overlap: ") and "0 … 1 share" in lines[0], lines
    assert not (tmp_path / "bad.zarr").exists()


def test_fb_overlap_is_refused_where_a_profile_or_a_layout_gives_it(tmp_path):
    import yaml

    profile = tmp_path / "pair.yaml"
    profile.write_text(yaml.safe_dump({"format": "ppsweep-costs/1", "t_f": 0.01, "t_b": 0.02, "t_fb": 0.025,
                                       "message": {"alpha": 1e-5, "beta": 1e10, "bytes": 1e7}}))
    with pytest.raises(ValueError, match=r"^fb_overlap: the profile gives t_fb .*set fb_overlap=null$"):
        load_config(["+sweep=bandwidth", "costs=profile", f"costs.profile={profile}", "fb_overlap=[0.5]"])
    with pytest.raises(ValueError, match=r"^fb_overlap: layout sweeps take the fb_overlap of each system .*set fb_overlap=null$"):
        load_config(["+sweep=layout", "p=[2]", "m=[4]", "fb_overlap=[0.5]"])


def test_a_profile_without_t_fb_takes_the_axis(tmp_path):
    import yaml

    from ppsweep.sweep.evaluate import simulate_table
    from ppsweep.tables.build import build_schedule

    profile = tmp_path / "halves.yaml"
    profile.write_text(yaml.safe_dump({"format": "ppsweep-costs/1", "t_f": 0.01, "t_b": 0.02,
                                       "message": {"alpha": 1e-5, "beta": 1e10, "bytes": 1e7}}))
    base = ["p=[4]", "m=[8]", "schedules=[dualpipe]", "costs=profile", f"costs.profile={profile}", "engine.method=scan"]
    table = build_schedule("dualpipe", 4, 8)
    axis = simulate_table(load_config([*base, "fb_overlap=[0,0.5]"]), table)["t_sim"]
    for k, v in enumerate((0.0, 0.5)):
        scalar = simulate_table(load_config([*base, f"system.fb_overlap={v}"]), table)["t_sim"]
        assert np.array_equal(axis[..., k], scalar), v
    assert axis[..., 1] < axis[..., 0]


def test_existing_stores_keep_their_identity():
    from ppsweep.store.identity import identity

    plain = identity(load_config(["+sweep=bandwidth"]))  # the system's scalar stays where it was
    assert "fb_overlap" not in plain and "fb_overlap" in plain["system"]
    axis = identity(load_config(["+sweep=bandwidth", "fb_overlap=[0.5]"]))
    assert set(axis) - set(plain) == {"fb_overlap"} and {k: v for k, v in axis.items() if k != "fb_overlap"} == plain


def test_a_null_axis_takes_its_default_only_when_null(tmp_path):
    # a profile with free transfers (beta = inf) has no bandwidth to default to; a given bandwidth needs none
    import yaml

    profile = tmp_path / "free.yaml"
    profile.write_text(yaml.safe_dump({"format": "ppsweep-costs/1", "t_f": 0.01, "t_b": 0.02,
                                       "message": {"alpha": 1e-5, "beta": float("inf"), "bytes": 1e7}}))
    base = ["p=[4]", "m=[8]", "costs=profile", f"costs.profile={profile}"]
    with pytest.raises(ValueError, match=r"^bandwidth: the profile's message.beta is inf; give the sweep's bandwidth"):
        load_config(base)
    assert load_config([*base, "bandwidth=[1e10]"]).bandwidth.tolist() == [1e10]
