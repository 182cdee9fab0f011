"""The cost model (docs/contract.md §3): seconds and bytes from a model, a system and a table.

Durations never come from the table; the table only says which stage runs where and how large
each stage is (``stage_fractions``, the share of the model's layers it holds, unless the model
names its own ``stage_layers``).

Choices where the contract is silent (also in the README, "Cost model"):

- By default compute counts the transformer layers only (embedding and LM head add memory, not
  time); ``head_compute=True`` adds the embedding and the LM head with its loss as compute (and
  their activations) on the first and the last stage.
- Bytes moved by one layer's forward = its weights (``params_per_layer · bytes_per_value``) plus
  the activations it produces (Korthikanti et al.; without the ``5as²b`` attention scores under
  flash attention); a backward moves twice that, plus what recomputation re-creates.
- Activations stored per layer (Korthikanti et al. 2022, Table 2, no tensor parallelism):
  ``none`` ``sbh(34 + 5as/h)``, ``selective`` or flash attention ``34sbh``, ``full`` ``2sbh``.
  Recomputation adds to every backward (to I where the backward is split): ``full`` one more
  forward, ``selective`` the attention core ``4bs²h``; flash attention adds ``2bs²h`` (its
  backward recomputes ``QKᵀ``) and makes ``selective`` a no-op.
- A split backward (I, W) holds, from I until W, the output gradients of the layer's linear
  layers (``9sbh`` values: QKV 3h, projection h, fc1 4h, fc2 h), and under full recomputation
  also the linear layers' inputs the recomputation re-created (``7sbh`` values).
- A layer holds ``12h² + 13h`` parameters (attention, MLP, biases, two layer norms).
- The embedding (``vocab · h`` parameters) sits with stage 0 and an untied LM head of the same
  size with stage ``S-1``, in every replica (two replicas on a worker count twice).
- Persistent bytes per parameter: weights and gradients at ``bytes_per_value`` each plus
  ``optimizer_bytes_per_param`` (fp32 master copy and two Adam moments: 12).
- The microbatch size ``b = G/m`` may be fractional; every cost is linear in ``b``.

Modules, one concern each:

- :mod:`~ppsweep.cost_model.model`: :class:`ModelConfig` and the FLOPs and bytes of its parts;
- :mod:`~ppsweep.cost_model.system`: :class:`SystemConfig`;
- :mod:`~ppsweep.cost_model.roofline`: :func:`roofline_time`, :func:`layer_time`;
- :mod:`~ppsweep.cost_model.memory`: :class:`MemoryFigures`, :class:`ActivationSplit`, persistent and
  activation bytes per worker, :func:`memory_figures`;
- :mod:`~ppsweep.cost_model.stage`: :func:`stage_layers`, :class:`StageCosts`, :func:`stage_costs`,
  :func:`engine_costs`;
- :mod:`~ppsweep.cost_model.fields`: what the configs share (:data:`IDENTITY_WHEN_SET`).

Measured costs (a profile instead of the model) are :mod:`ppsweep.cost_profile`.
"""

from __future__ import annotations

from ppsweep.cost_model.fields import IDENTITY_WHEN_SET
from ppsweep.cost_model.memory import (
    ActivationSplit,
    MemoryFigures,
    activation_bytes_per_worker,
    memory_figures,
    pending_profile,
    persistent_bytes_per_worker,
    stage_activation_bytes,
)
from ppsweep.cost_model.model import MLP_KINDS, NORM_KINDS, RECOMPUTE_MODES, STAGE_LAYER_RULES, ModelConfig
from ppsweep.cost_model.roofline import layer_time, roofline_time
from ppsweep.cost_model.stage import StageCosts, engine_costs, stage_costs, stage_layers
from ppsweep.cost_model.system import SystemConfig

__all__ = [
    "IDENTITY_WHEN_SET",
    "MLP_KINDS",
    "NORM_KINDS",
    "RECOMPUTE_MODES",
    "STAGE_LAYER_RULES",
    "ActivationSplit",
    "MemoryFigures",
    "ModelConfig",
    "StageCosts",
    "SystemConfig",
    "activation_bytes_per_worker",
    "engine_costs",
    "layer_time",
    "memory_figures",
    "pending_profile",
    "persistent_bytes_per_worker",
    "roofline_time",
    "stage_activation_bytes",
    "stage_costs",
    "stage_layers",
]
