"""Model families of the Chess-World-Model benchmark and the one way to build them.

    from chessjax.models import create_model, count_params

    model = create_model("slice", "d256", seed=0, dropout=0.0)   # world model (state head)
    logits = model(moves_BT, train=False)                        # float32[B, T, 1878]
    logits, hiddens = model(moves_BT, return_hiddens=True)       # + layers+1 arrays [B, T, D]
    state = model.init_state(B)
    state, logits_B = model.step(state, moves_B)                 # streaming, one move per game

    lm = create_model("slice", "d128", head="tokens", vocab_size=77, tie_embeddings=True)
    lm(tokens_BT)                                                # float32[B, T, 77]

A model is `heads.Model(backbone, head)`: the family's backbone (`stack.Stack`: embedding,
dropout, residual blocks, optional final norm, built by the family module's `build_backbone`;
`chessjax.models.transformer`, `slice`, `gated_deltanet`, `mamba`, `gpt2`, or any module that
is a `registry.FamilyModule`) and a `heads.StateHead` or `heads.TokenHead`. Inputs are
right-padded token ids int32[B, T] (for moves, PAD = `encoding.PAD_ID`); dropout is active only
when `train=True`. Families, configs and the builders live in `chessjax.models.registry`, the
grid's sizes in `chessjax.models.sizes`; both are re-exported here.
"""

from chessjax.models.registry import (  # noqa: F401 (the package's public names)
  FAMILIES,
  HEADS,
  LM_FAMILIES,
  FamilyModule,
  abstract_model,
  count_params,
  create_model,
  family_module,
  family_sizes,
  model_config,
  streams,
)
from chessjax.models.sizes import SIZES  # noqa: F401

__all__ = [
  "FAMILIES",
  "HEADS",
  "LM_FAMILIES",
  "SIZES",
  "FamilyModule",
  "abstract_model",
  "count_params",
  "create_model",
  "family_module",
  "family_sizes",
  "model_config",
  "streams",
]
