"""The one config path: composing conf/ with overrides, validation, dimensions by name."""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep.sweep.config import DIMENSIONS, compose_config, config_yaml, load_config, load_plan, logspace, unit_region


def test_load_config_composes_sweeps_and_overrides():
    spec = load_config(["+sweep=bandwidth", "p=[4]", "system=fast_cp_slow_nw", "schedule_options={hanayo: {waves: 2}}"])
    assert spec.name == "bandwidth" and spec.p == (4,) and spec.m == (8, 12, 16, 32, 64)
    assert spec.schedule_options == {"hanayo": {"waves": 2}}
    assert spec.bandwidth.size == 64 and spec.bandwidth[0] == pytest.approx(1e9) and spec.bandwidth[-1] == pytest.approx(1e12)
    paper = load_config(["+sweep=paper", "schedule_options.hanayo.waves=2"])
    assert paper.schedule_options == {"chimera": {"split": "1:1"}, "hanayo": {"waves": 2}}
    assert paper.point_dims == ("schedule", "p", "m", "comm", "compute", "bandwidth", "latency")


def test_the_resolver_and_a_range_mapping_are_one_logspace():
    cfg = compose_config(["+sweep=bandwidth"])
    from_resolver = np.asarray(cfg.bandwidth, dtype=float)
    from_mapping = load_config(["+sweep=bandwidth", "bandwidth={start: 1.0e9, stop: 1.0e12, num: 64}"]).bandwidth
    assert from_resolver.tobytes() == from_mapping.tobytes()
    assert np.allclose(np.diff(np.log10(from_mapping)), 3 / 63)
    with pytest.raises(ValueError, match="bandwidth.num: must be an integer from 1 to 10,000"):
        logspace(1, 10, 0, "bandwidth")


def test_plan_keeps_job_keys_out_of_the_stored_config(tmp_path):
    plan = load_plan(["name=mine", "p=[4]", "m=[8]", "shards=1", "shard=0", f"results_dir={tmp_path}"])
    assert plan.path == tmp_path / "mine.zarr" and plan.shard == 0 and plan.units == ((0, 0),)
    assert "name: mine" in plan.config_yaml and "shard:" not in plan.config_yaml and "finalize" not in plan.config_yaml
    assert config_yaml(compose_config(["name=mine", "shard=0"])) == config_yaml(compose_config(["name=mine"]))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["+sweep=nope"], "sweep: unknown sweep 'nope'; available: bandwidth, comm_modes"),
        (["name=x", "shards=0"], "shards: must be an integer >= 1"),
        (["name=x", "progress=3"], "progress: must be true or false"),
        (["name=x", "engine.compilation_cache=''"], "engine.compilation_cache"),
        (["name=x", "schedule_options=[1]"], "schedule_options: must map schedule names"),
    ],
)
def test_bad_run_keys_name_the_field(overrides, message):
    with pytest.raises(ValueError, match=message):
        load_plan(overrides)


def test_dimensions_and_unit_regions_go_by_name():
    assert list(DIMENSIONS)[:3] == ["schedule", "p", "m"] and list(DIMENSIONS)[-4:] == ["bandwidth", "latency", "fb_overlap", "sample"]
    assert unit_region(("schedule", "p", "m", "bandwidth"), 2, 3) == (slice(None), slice(2, 3), slice(3, 4), slice(None))
    assert unit_region(("m", "p"), 2, 3) == (slice(3, 4), slice(2, 3))
