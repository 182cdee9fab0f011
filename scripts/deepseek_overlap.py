"""DualPipe's overlap credit (``fb_overlap``) from DeepSeek's published profile of one overlapped F&B pair.

Usage::

    python scripts/deepseek_overlap.py train.json                  # print the spans and the credits
    python scripts/deepseek_overlap.py train.json --excerpt x.json.gz   # also write the events used

``train.json`` is ``github.com/deepseek-ai/profile-data`` (PyTorch profiler, H800, EP64 TP1, 4K
sequences): ONE overlapped pair of a forward chunk and a backward chunk of DualPipe, each chunk 4
MoE layers; pipeline messages are not in it. ppsweep's pair rule (:func:`ppsweep.tables.ops.pair_time`)
is ``pair = (1 - fb_overlap)·t_f + t_b``, so the credit is the time the pair saves against its halves
run one after the other, as a share of the forward half: ``(T_F + T_B - T_pair) / T_F``.

How the halves are found (README, "DualPipe's overlap credit, measured"): the CPU thread marks every
piece of the pair with a ``user_annotation`` named ``attn(F)``, ``mlp(B)``, ``dispatch(F)``,
``combine(B)``, ``attn(W)``, ... Each GPU kernel is tied to its launch on the CPU by the profiler's
``correlation`` id; the innermost annotation around the launch names the kernel's half (``F``; ``B``
and ``W`` are the backward half) and its kind (``attn``/``mlp``: compute; ``dispatch``/``combine``:
the expert-parallel all-to-all). Then

- ``T_pair``: the pair's GPU span, first kernel start to last kernel end over all streams;
- ``C_F``, ``C_B``: the summed durations of each half's compute kernels (B includes W);
- ``A_F``, ``A_B``: the summed durations of each half's all-to-all kernels.

The trace holds no run of a half alone, so a half alone is taken as its kernels back to back: ``C``
for halves costed as compute (as ppsweep's roofline model costs them: no expert all-to-all), ``C + A``
for halves that carry their all-to-all. Kernels that overlap run a little slower than alone, and the
all-to-all kernels' durations include waiting for peers, so ``C + A`` overstates a half alone.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

#: An annotation of one piece of the pair: module and half, e.g. ``attn(F)``, ``combine(B)``.
PIECE = re.compile(r"^(attn|mlp|dispatch|combine)\((F|B|W)\)$")
#: Modules that are the expert-parallel all-to-all (the rest is compute).
ALL_TO_ALL = ("dispatch", "combine")
#: GPU activity the profiler records, and CPU launch events (the correlation's other end).
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def read_trace(path: str | Path) -> dict[str, Any]:
    """A Chrome trace (``.json`` or ``.json.gz``)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def pair_spans(trace: dict[str, Any]) -> dict[str, float]:
    """The pair's GPU span and each half's compute and all-to-all kernel time, microseconds.

    Returns:
      ``pair``, ``compute_F``, ``compute_B`` (B and W), ``a2a_F``, ``a2a_B``, and ``kernels``
      (GPU events attributed to the pair).

    Raises:
      ValueError: a kernel whose launch has no piece annotation around it.
    """
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    pieces = sorted(((e["ts"], e["ts"] + e["dur"], e["name"], e["tid"]) for e in events
                     if e.get("cat") == "user_annotation" and PIECE.match(str(e.get("name", "")))), key=lambda a: a[0])
    starts = [a[0] for a in pieces]
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}
    totals = {"compute_F": 0.0, "compute_B": 0.0, "a2a_F": 0.0, "a2a_B": 0.0}
    first, last, n = float("inf"), float("-inf"), 0
    for e in events:
        if e.get("cat") not in GPU_CATS:
            continue
        launch = launches.get(e.get("args", {}).get("correlation"))
        if launch is None:
            raise ValueError(f"kernel at ts={e['ts']}: no launch with its correlation id")
        piece = _innermost(pieces, starts, launch["ts"])
        if piece is None:
            raise ValueError(f"kernel at ts={e['ts']}: its launch at ts={launch['ts']} is in no piece annotation")
        module, half = PIECE.match(piece).groups()
        kind = "a2a" if module in ALL_TO_ALL else "compute"
        totals[f"{kind}_{'F' if half == 'F' else 'B'}"] += e["dur"]
        first, last, n = min(first, e["ts"]), max(last, e["ts"] + e["dur"]), n + 1
    return {"pair": last - first, **totals, "kernels": n}


def _innermost(pieces: list, starts: list, ts: float) -> str | None:
    """The name of the shortest piece annotation that contains ``ts`` (any thread: the main thread
    annotates, the autograd thread launches the backward's kernels)."""
    best = None
    for start, end, name, _ in pieces[: bisect.bisect_right(starts, ts)]:
        if start <= ts <= end and (best is None or end - start < best[1] - best[0]):
            best = (start, end, name)
    return None if best is None else best[2]


def credits(spans: dict[str, float]) -> dict[str, float]:
    """``fb_overlap`` for halves costed as compute alone and as compute plus their all-to-all.

    ``(T_F + T_B - T_pair) / T_F``, raw (``*_raw``, may leave [0, 1]) and clipped to [0, 1] (what
    the engine accepts).
    """
    out = {}
    for name, f, b in (("compute", spans["compute_F"], spans["compute_B"]),
                       ("a2a", spans["compute_F"] + spans["a2a_F"], spans["compute_B"] + spans["a2a_B"])):
        raw = (f + b - spans["pair"]) / f
        out[f"{name}_raw"] = raw
        out[name] = min(1.0, max(0.0, raw))
    return out


def excerpt(trace: dict[str, Any]) -> dict[str, Any]:
    """The events :func:`pair_spans` reads, with only the fields it reads (a small test file)."""
    events = trace["traceEvents"]
    gpu = [e for e in events if e.get("cat") in GPU_CATS]
    used = {e["args"]["correlation"] for e in gpu}
    keep = []
    for e in events:
        cat = e.get("cat")
        if cat == "user_annotation" and PIECE.match(str(e.get("name", ""))):
            keep.append({k: e[k] for k in ("cat", "name", "ts", "dur", "tid")})
        elif cat in GPU_CATS:
            keep.append({"cat": cat, "ts": e["ts"], "dur": e["dur"], "args": {"correlation": e["args"]["correlation"]}})
        elif cat in LAUNCH_CATS and e.get("args", {}).get("correlation") in used:
            keep.append({"cat": cat, "ts": e["ts"], "args": {"correlation": e["args"]["correlation"]}})
    return {"traceEvents": keep}


def main(argv: list[str] | None = None) -> int:
    """Print the spans (ms) and the credits; optionally write the excerpt."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", help="DeepSeek's train.json (or an excerpt, .json.gz)")
    parser.add_argument("--excerpt", help="also write the events used to this .json.gz")
    args = parser.parse_args(argv)
    try:
        trace = read_trace(args.trace)
        spans = pair_spans(trace)
    except (OSError, ValueError, KeyError) as error:
        print(f"error: {args.trace}: {error}", file=sys.stderr)
        return 2
    for key, value in spans.items():
        print(f"{key:>10}: {value / 1000:.3f} ms" if key != "kernels" else f"{key:>10}: {value}")
    for key, value in credits(spans).items():
        print(f"fb_overlap {key:>12}: {value:.4f}")
    if args.excerpt:
        with gzip.open(args.excerpt, "wt") as f:
            json.dump(excerpt(trace), f, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
