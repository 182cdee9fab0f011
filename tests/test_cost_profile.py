"""Profiled costs (ppsweep.cost_profile, ``costs=profile``): the file, the stage rule, a sweep on it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from ppsweep.cli.main import run
from ppsweep.cost_profile import (
    CostProfile,
    StageCountError,
    engine_costs_from_profile,
    fb_overlap_of,
    load_cost_profile,
    profile_from_mapping,
    profile_memory,
    stage_values,
    write_cost_profile,
)
from ppsweep.engine import simulate
from ppsweep.engine.comm import MODES
from ppsweep.engine.reference import reference_simulate
from ppsweep.store.identity import fingerprint, identity, identity_difference
from ppsweep.sweep.config import compose_config, load_plan, spec_from_config
from ppsweep.tables.build import build_schedule

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "example_profile.yaml"

#: Four unequal stages (first and last lighter), Hockney messages, a pair time, memory.
UNEQUAL = {
    "format": "ppsweep-costs/1",
    "source": "test",
    "t_f": [0.010, 0.013, 0.012, 0.009],
    "t_b": [0.021, 0.025, 0.026, 0.017],
    "t_i": [0.011, 0.012, 0.014, 0.008],
    "t_w": [0.010, 0.013, 0.012, 0.009],
    "t_fb": [0.027, 0.033, 0.034, 0.022],
    "message": {"alpha": 2.0e-5, "beta": 5.0e9, "bytes": 3.0e7},
    "memory": {"activation_bytes": [1.0e9, 1.2e9, 1.1e9, 0.8e9], "persistent_bytes": [5e9, 4e9, 4e9, 6e9]},
    "grad_bytes": [1e8, 2e8, 2e8, 1e8],
}


def write_yaml(path: Path, data: dict) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(data))
    return path


# ---- the file ----------------------------------------------------------------------------------------
def test_yaml_json_and_csv_read_the_same_and_write_round_trips(tmp_path):
    data = {k: v for k, v in UNEQUAL.items() if k != "grad_bytes"}
    from_yaml = load_cost_profile(write_yaml(tmp_path / "p.yaml", data))
    (tmp_path / "p.json").write_text(json.dumps(data))
    assert load_cost_profile(tmp_path / "p.json") == from_yaml
    rows = ["stage,t_f,t_b,t_i,t_w,t_fb,alpha,beta,msg_bytes,activation_bytes,persistent_bytes"]
    for s in range(4):
        rows.append(",".join(str(x) for x in [s, *(data[k][s] for k in ("t_f", "t_b", "t_i", "t_w", "t_fb")),
                                              2.0e-5, 5.0e9, 3.0e7, data["memory"]["activation_bytes"][s],
                                              data["memory"]["persistent_bytes"][s]]))
    (tmp_path / "p.csv").write_text("\n".join(rows) + "\n")
    assert load_cost_profile(tmp_path / "p.csv") == CostProfile(**{**from_yaml.__dict__, "source": ""})
    write_cost_profile(from_yaml, tmp_path / "out.yaml")
    assert load_cost_profile(tmp_path / "out.yaml") == from_yaml
    assert from_yaml.n_stages == 4 and from_yaml.t_b[2] == 0.026


def test_defaults_scalars_and_message_time(tmp_path):
    p = profile_from_mapping({"t_f": 0.01, "t_i": 0.012, "t_w": 0.008, "message": {"time": 1e-4}})
    assert p.n_stages is None and p.t_b == (0.02,) and p.network() == (1e-4, math.inf, 0.0)
    q = profile_from_mapping({"t_f": [0.01, 0.02], "t_b": 0.04, "message": {"time": 0}})
    assert q.n_stages == 2 and q.t_b == (0.04, 0.04) and q.t_i == q.t_w == (0.02, 0.02)
    write_cost_profile(p, tmp_path / "s.yaml")
    assert load_cost_profile(tmp_path / "s.yaml") == p


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "other/2"}, r"^format: must be 'ppsweep-costs/1'"),
        ({"t_fwd": 1}, r"^t_fwd: unknown key; accepted: format, "),
        ({"t_f": None}, r"^t_f: missing"),
        ({"t_b": None, "t_i": None}, r"^t_b: missing; give t_b .* or both t_i and t_w"),
        ({"t_f": [0.01, -1, 0.01, 0.01]}, r"^t_f\[1\]: must be a finite number >= 0"),
        ({"t_b": "fast"}, r"^t_b: must be a finite number >= 0"),
        ({"t_w": [0.01, 0.01]}, r"^t_w: has 2 stages but t_f has 4"),
        ({"t_f": []}, r"^t_f: an empty list"),
        ({"t_fb": [0.05, 0.03, 0.03, 0.02]}, r"^t_fb: stage 0: a pair's time must lie between t_b and t_f \+ t_b"),
        ({"message": None}, r"^message: missing"),
        ({"message": {"alpha": 1e-5, "beta": 1e9}}, r"^message.bytes: missing"),
        ({"message": {"time": 1e-4, "alpha": 1e-5}}, r"^message: give either time or alpha, beta and bytes"),
        ({"message": {"alpha": 1e-5, "beta": 0, "bytes": 1}}, r"^message.beta: must be > 0"),
        ({"message": {"speed": 1}}, r"^message.speed: unknown key"),
        ({"memory": {"activation_bytes": 1e9}}, r"^memory.persistent_bytes: missing"),
        ({"microbatch_size": 0}, r"^microbatch_size: must be > 0"),
        ({"source": 3}, r"^source: must be text"),
    ],
)
def test_each_bad_field_gets_one_line_naming_it(change, message):
    data = {**UNEQUAL, **change}
    with pytest.raises(ValueError, match=message) as error:
        profile_from_mapping({k: v for k, v in data.items() if v is not None})
    assert "\n" not in str(error.value)


def test_bad_files(tmp_path):
    with pytest.raises(ValueError, match=r"^costs.profile: .*unknown file type '.txt'"):
        load_cost_profile(tmp_path / "p.txt")
    with pytest.raises(ValueError, match=r"^costs.profile: cannot read"):
        load_cost_profile(tmp_path / "absent.yaml")
    (tmp_path / "bad.yaml").write_text("t_f: [1, 2\n")
    with pytest.raises(ValueError, match=r"^costs.profile: .* is not valid YAML"):
        load_cost_profile(tmp_path / "bad.yaml")
    (tmp_path / "p.csv").write_text("stage,t_f,t_b,msg_time\n0,0.1,0.2,1e-4\n2,0.1,0.2,1e-4\n")
    with pytest.raises(ValueError, match=r"^stage: rows must be stages 0, 1"):
        load_cost_profile(tmp_path / "p.csv")
    (tmp_path / "p.csv").write_text("stage,t_f,t_b,msg_time\n0,0.1,0.2,1e-4\n1,0.1,0.2,2e-4\n")
    with pytest.raises(ValueError, match=r"^msg_time: must be the same on every row"):
        load_cost_profile(tmp_path / "p.csv")


# ---- stages -----------------------------------------------------------------------------------------
def test_stage_split_merge_and_mismatch():
    values = [1.0, 2.0, 3.0, 4.0]
    np.testing.assert_array_equal(stage_values(values, 4, 4), values)
    np.testing.assert_array_equal(stage_values(values, 4, 8), [0.5, 0.5, 1, 1, 1.5, 1.5, 2, 2])
    np.testing.assert_array_equal(stage_values(values, 4, 2), [3.0, 7.0])
    np.testing.assert_array_equal(stage_values([5.0], None, 3), [5.0, 5.0, 5.0])
    with pytest.raises(StageCountError, match="the profile has 4 stages and the table 6"):
        stage_values(values, 4, 6)
    # split chunks add up to the measured stage; the pair credit is the same on either
    p = profile_from_mapping(UNEQUAL)
    assert fb_overlap_of(p, 4) == pytest.approx(fb_overlap_of(p, 8), rel=1e-12)
    f, b, fb = (np.array(UNEQUAL[k]) for k in ("t_f", "t_b", "t_fb"))
    assert fb_overlap_of(p, 4) == pytest.approx((f + b - fb).sum() / f.sum(), rel=1e-15)


# ---- the engine and the reference on profiled costs -------------------------------------------------
@pytest.mark.parametrize("name", ["1f1b", "zb_h1", "interleaved_1f1b", "dualpipev", "chimera"])
def test_reference_agrees_with_the_engine_on_profiled_costs_in_every_mode(name):
    profile = profile_from_mapping(UNEQUAL)
    table = build_schedule(name, 4, 8)
    costs = engine_costs_from_profile(profile, table)
    n = table.n_stages
    stage = {k: stage_values(getattr(profile, k), 4, n) for k in ("t_f", "t_b", "t_i", "t_w", "grad_bytes")}
    assert len(set(stage["t_f"].tolist())) > 1  # unequal stages
    for mode in MODES:
        engine = float(np.ravel(simulate(table, costs, mode).t_sim)[0])
        ref = reference_simulate(table, stage["t_f"], stage["t_b"], 2.0e-5, 5.0e9, 3.0e7, mode, t_i=stage["t_i"],
                                 t_w=stage["t_w"], grad_bytes=stage["grad_bytes"], fb_overlap=fb_overlap_of(profile, n))
        assert engine == pytest.approx(ref.t_sim, rel=1e-12), (name, mode)


def test_profile_memory_follows_the_table():
    profile = profile_from_mapping(UNEQUAL)
    table = build_schedule("1f1b", 4, 8)
    figures = profile_memory(profile, table)
    act = np.array(UNEQUAL["memory"]["activation_bytes"]) * np.array([4, 3, 2, 1])  # 1F1B holds p - w
    total = act + np.array(UNEQUAL["memory"]["persistent_bytes"])
    w = int(np.argmax(total))
    assert (figures.peak_activation_bytes, figures.persistent_bytes) == (act[w], UNEQUAL["memory"]["persistent_bytes"][w])


# ---- a sweep on a profile ---------------------------------------------------------------------------
SWEEP = ["+sweep=bandwidth", "costs=profile", "p=[4]", "m=[8]", "schedules=[gpipe,1f1b,zb_h1,dualpipev,interleaved_1f1b]",
         "bandwidth=[1.0e9,1.0e11]", "latency=[1.0e-6]", "comm.mode=[overlap,ports]", "progress=false", "name=prof"]


def test_a_sweep_on_a_profile_equals_simulate_with_the_same_costs(tmp_path):
    path = write_yaml(tmp_path / "unequal.yaml", UNEQUAL)
    assert run(compose_config([*SWEEP, f"costs.profile={path}", f"results_dir={tmp_path}"])) == 0
    ds = xr.open_zarr(tmp_path / "prof.zarr")
    profile = load_cost_profile(path)
    for name in ds.schedule.values:
        table = build_schedule(str(name), 4, 8)
        # the sweep's point shape: bandwidth x latency
        costs = engine_costs_from_profile(profile, table, alpha=ds.latency.values[None, :], beta=ds.bandwidth.values[:, None])
        for mode in ds.comm.values:
            want = simulate(table, costs, str(mode)).t_sim
            got = ds.t_sim.sel(schedule=name, p=4, m=8, comm=mode).transpose("bandwidth", "latency").values
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=0, err_msg=f"{name} {mode}")  # last-bit order of sums
        memory = profile_memory(profile, table)
        assert float(ds.peak_memory_bytes.sel(schedule=name, p=4, m=8)) == memory.peak_memory_bytes
    assert bool(ds.valid.all())
    # throughput counts m microbatches of the profile's size (1 sequence: not given)
    t = ds.t_sim.sel(schedule="1f1b", p=4, m=8)
    np.testing.assert_array_equal(ds.throughput.sel(schedule="1f1b", p=4, m=8), 8 / t)


def test_identity_covers_the_profile_content_not_its_path(tmp_path):
    a = write_yaml(tmp_path / "a.yaml", UNEQUAL)
    b = write_yaml(tmp_path / "b.yaml", UNEQUAL)
    c = write_yaml(tmp_path / "c.yaml", {**UNEQUAL, "t_w": [0.010, 0.013, 0.012, 0.0091]})

    def spec(path: Path):
        return spec_from_config(compose_config([*SWEEP, f"costs.profile={path}"]))

    def digest(path: Path) -> str:
        return fingerprint(spec(path))

    # The values are in the identity; so is the file's recorded place (its absolute path and digest,
    # ``inputs``: a store is resumed and repaired from the file it was computed from).
    same_content = identity(spec(a)), identity(spec(b))
    assert same_content[0]["profile"] == same_content[1]["profile"]
    assert identity_difference(*same_content).startswith("input file.costs.profile.path:")
    assert digest(a) != digest(c) and identity(spec(a))["profile"] != identity(spec(c))["profile"]
    assert digest(a) != fingerprint(spec_from_config(compose_config([s for s in SWEEP if s != "costs=profile"])))


def test_relative_path_recorded_absolute_and_bad_files_refused_before_a_store(tmp_path):
    write_yaml(tmp_path / "rel.yaml", UNEQUAL)
    plan = load_plan([*SWEEP, "costs.profile=rel.yaml"], base_dir=tmp_path)
    assert f"profile: {tmp_path / 'rel.yaml'}" in plan.config_yaml
    # a bad file, a missing path, a message time with a bandwidth axis: exit 2, no store
    write_yaml(tmp_path / "bad.yaml", {**UNEQUAL, "t_b": [1, 2]})
    write_yaml(tmp_path / "time.yaml", {**UNEQUAL, "message": {"time": 1e-4}})
    for extra, line in (("costs.profile=bad.yaml", "t_b: has 2 stages"), (None, "costs.profile: missing"),
                        ("costs.profile=time.yaml", "bandwidth: the profile gives the message time")):
        overrides = [*SWEEP, f"results_dir={tmp_path}"] + ([f"costs.profile={tmp_path / extra.split('=')[1]}"] if extra else [])
        outcome_cfg = compose_config(overrides)
        from ppsweep.cli.main import run_outcome

        outcome = run_outcome(outcome_cfg)
        assert outcome["status"] == 2 and line in outcome["message"] and "\n" not in outcome["message"]
    assert not (tmp_path / "prof.zarr").exists()
    # a message time: one latency (the time), the system's bandwidth, no bytes
    spec = spec_from_config(compose_config([*SWEEP, "bandwidth=null", "latency=null", f"costs.profile={tmp_path / 'time.yaml'}"]))
    assert spec.latency.tolist() == [1e-4] and len(spec.bandwidth) == 1


def test_example_profile_loads():
    profile = load_cost_profile(EXAMPLE)
    assert profile.n_stages == 4 and profile.has_memory and profile.microbatch_size == 4


def test_trace_of_a_profile_is_the_engine_step(tmp_path):
    from ppsweep.sweep.config import load_config
    from ppsweep.viz.trace import main as trace_main, simulate_step

    profile = load_cost_profile(EXAMPLE)
    spec = load_config(["name=t"])
    table = build_schedule("dualpipev", 4, 8)
    step = simulate_step(table, spec.model, spec.system, 1e10, 1e-6, "ports", profile=profile)
    costs = engine_costs_from_profile(profile, table, alpha=1e-6, beta=1e10, t_opt=0.0)
    assert step.t_sim == pytest.approx(float(np.ravel(simulate(table, costs, "ports").t_sim)[0]), rel=1e-12)
    out = tmp_path / "t.json"
    assert trace_main(["dualpipev", "p=4", "m=8", f"profile={EXAMPLE}", "mode=ports", "bandwidth=1e10",
                       "latency=1e-6", "--trace", str(out)]) == 0
    assert json.loads(out.read_text())["otherData"]["profile"] == str(EXAMPLE)
