"""The paper's nine systems: three compute levels × three networks."""

from __future__ import annotations

from dataclasses import dataclass

#: Levels, slowest first.
LEVELS = ("slow", "mid", "fast")
#: Peak FLOP/s per compute level.
PEAKS = {"slow": 1e14, "mid": 1e15, "fast": 1e16}
#: (bandwidth B/s, latency s) per network level.
NETWORKS = {"slow": (5e9, 5e-6), "mid": (5e10, 5e-7), "fast": (5e11, 5e-8)}
#: Communication modes the paper sweep covers.
MODES = ("overlap", "blocking", "contention")
#: Words for the ratio class (compute level minus network level).
CLASS_WORDS = {
    -2: "compute 100× slower than the network (relative to the baseline)",
    -1: "compute 10× slower",
    0: "balanced",
    1: "compute 10× faster than the network",
    2: "compute 100× faster",
}


@dataclass(frozen=True)
class System:
    """One of the paper's systems.

    Attributes:
      compute: compute level, one of ``LEVELS``.
      network: network level, one of ``LEVELS``.
    """

    compute: str
    network: str

    def __post_init__(self) -> None:
        for name in ("compute", "network"):
            if getattr(self, name) not in LEVELS:
                raise ValueError(f"System.{name}: must be one of {', '.join(LEVELS)}, got {getattr(self, name)!r}")

    @property
    def label(self) -> str:
        """``<compute> cp / <network> nw``."""
        return f"{self.compute} cp / {self.network} nw"

    @property
    def short(self) -> str:
        """``<compute>/<network>``."""
        return f"{self.compute}/{self.network}"

    @property
    def peak_flops(self) -> float:
        """Peak compute, FLOP/s."""
        return PEAKS[self.compute]

    @property
    def bandwidth(self) -> float:
        """Network bandwidth, B/s."""
        return NETWORKS[self.network][0]

    @property
    def latency(self) -> float:
        """Network latency, s."""
        return NETWORKS[self.network][1]

    @property
    def ratio_class(self) -> int:
        """Compute level minus network level, −2 … +2 (relative results depend only on it)."""
        return LEVELS.index(self.compute) - LEVELS.index(self.network)

    @property
    def network_limited(self) -> bool:
        """The network is slower than the compute, relative to the baseline."""
        return self.ratio_class > 0

    def style(self) -> dict:
        """Matplotlib style: colour by network, line style by compute."""
        colour = {"slow": "tab:red", "mid": "tab:orange", "fast": "tab:green"}[self.network]
        line = {"slow": ":", "mid": "--", "fast": "-"}[self.compute]
        return dict(color=colour, linestyle=line, marker="o", markersize=3)


SYSTEMS: tuple[System, ...] = tuple(System(cp, nw) for cp in LEVELS for nw in LEVELS)
LABELS: list[str] = [s.label for s in SYSTEMS]
BY_LABEL: dict[str, System] = {s.label: s for s in SYSTEMS}
NETWORK_LIMITED: list[str] = [s.label for s in SYSTEMS if s.network_limited]
NOT_NETWORK_LIMITED: list[str] = [s.label for s in SYSTEMS if not s.network_limited]
#: Systems shown in the ablation summary table.
REPRESENTATIVE = [System("slow", "fast"), System("mid", "mid"), System("fast", "mid"), System("fast", "slow")]
