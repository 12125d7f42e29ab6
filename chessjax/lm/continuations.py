"""Next-token logits after a few short continuations of one prefix, the prefix run once.

`continuation_logits_fn(graphdef, params, model_state, pad_id=...)` returns a
`fn(prefixes int32[B, T], lengths int32[B], continuations int32[B, K, C]) -> float32[B, K, C, V]`:
row b's prefix is `prefixes[b, :lengths[b]]` (the rest padding), its K continuations of C tokens
are read right after it, and `out[b, k, c]` are the logits after token c of continuation k, the
values of the full forward over `prefix + continuation[:c + 1]` (a causal model's logits at a
position depend only on the tokens up to it). `chessjax.lm.probing.task_logits` scores the
probing tasks through it (Toshniwal et al. 2022, sections 3.2-3.4: the prompts of a row share the
game prefix).

Two implementations, the same logits up to float rounding:
* GPT-2 (a backbone whose blocks all mix with `chessjax.models.gpt2.Attention`, full or windowed;
  learned positions): the prefix runs once
  through the blocks, and each continuation token attends to the prefix's keys and values of
  every layer (and to the earlier tokens of its own continuation), as a key-value cache would:
  cost ~ B x T + B x K x C tokens instead of B x K x (T + C). The blocks' own submodules (ln_1,
  c_attn, c_proj, ln_2, MLP, ln_f, the head) do the work; only the attention over the cached keys
  is written here, with GPT-2's masking (`gpt2.MASK_VALUE` replaces masked logits, softmax in
  float32, products in the model's dtype). The backbone is read through its parts (`embed`,
  `pos_embed`, `blocks` of `layers.ResidualBlock`, `norm`), as `chessjax.models` builds it.
* any other model: the K sequences `prefix + continuation` of each row through the model's
  forward, [B x K, T + C] tokens.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from chessjax.models import gpt2, layers


def shares_prefix(model) -> bool:
  """Whether the prefix-once GPT-2 path applies to this model: a backbone of `embed`, `blocks`
  (pre-norm residual blocks, every mixer `gpt2.Attention`), `pos_embed` and `norm` (either may be
  None)."""
  backbone = getattr(model, "backbone", None)
  blocks = getattr(backbone, "blocks", None)
  return (
    all(hasattr(backbone, name) for name in ("embed", "pos_embed", "norm"))
    and blocks is not None
    and len(blocks) > 0
    and all(
      isinstance(b, layers.ResidualBlock) and isinstance(b.mixer, gpt2.Attention) for b in blocks
    )
  )


def _gpt2_continuations(graphdef, params, model_state, prefix_BT, lengths_B, cont_BKC):
  model = nnx.merge(graphdef, params, model_state)
  bb = model.backbone
  cfg = bb.blocks[0].mixer.cfg
  b, t = prefix_BT.shape
  _, k, c = cont_BKC.shape
  h_, dh, d = cfg.heads, cfg.head_dim, cfg.d
  dtype, f32 = layers.DTYPES[cfg.dtype], jnp.float32
  scale = dh**-0.5
  cont_pos = lengths_B[:, None] + jnp.arange(c)[None]  # [B, C]
  h_p, h_c = bb.embed(prefix_BT), bb.embed(cont_BKC)  # [B, T, D], [B, K, C, D]
  if bb.pos_embed is not None:
    pos = bb.pos_embed.embedding[...]
    h_p, h_c = h_p + pos[:t][None], h_c + pos[cont_pos][:, None]
  h_p, h_c = h_p.astype(f32), h_c.astype(f32)
  # Key j of the prefix is visible to continuation token c iff j < length (and within the window);
  # token e of the same continuation iff e <= c (and within the window).
  diff_p = cont_pos[:, :, None] - jnp.arange(t)[None, None]  # [B, C, T]
  see_p = jnp.arange(t)[None, None] < lengths_B[:, None, None]
  diff_c = jnp.arange(c)[:, None] - jnp.arange(c)[None]  # [C, C]
  see_c = diff_c >= 0
  if cfg.window is not None:
    see_p &= diff_p <= cfg.window
    see_c &= diff_c <= cfg.window
  see_p = see_p[:, None, :, None, :]  # [B, 1, C, 1, T]
  see_c = see_c[None, None, :, None, :]  # [1, 1, C, 1, C]
  last = len(bb.blocks) - 1
  for i, blk in enumerate(bb.blocks):
    attn = blk.mixer
    qkv_p = attn.c_attn(blk.norm1(h_p)).reshape(b, t, 3, h_, dh)
    qkv_c = attn.c_attn(blk.norm1(h_c)).reshape(b, k, c, 3, h_, dh)
    kp, vp = qkv_p[:, :, 1].astype(dtype), qkv_p[:, :, 2].astype(dtype)
    qc, kc, vc = (qkv_c[:, :, :, j].astype(dtype) for j in range(3))
    logit_p = jnp.einsum("bkchd,bthd->bkcht", qc, kp).astype(f32) * scale
    logit_c = jnp.einsum("bkchd,bkehd->bkche", qc, kc).astype(f32) * scale
    logits = jnp.concatenate(
      [jnp.where(see_p, logit_p, gpt2.MASK_VALUE), jnp.where(see_c, logit_c, gpt2.MASK_VALUE)],
      axis=-1,
    )
    w = jax.nn.softmax(logits, axis=-1).astype(dtype)
    o = jnp.einsum("bkcht,bthd->bkchd", w[..., :t], vp) + jnp.einsum(
      "bkche,bkehd->bkchd", w[..., t:], vc
    )
    h_c = h_c + attn.c_proj(o.astype(f32).reshape(b, k, c, d)).astype(f32)
    h_c = h_c + blk.mlp(blk.norm2(h_c)).astype(f32)
    if i < last:  # The last block's prefix output feeds nothing.
      o_p = gpt2.attention(
        qkv_p[:, :, 0], qkv_p[:, :, 1], qkv_p[:, :, 2], window=cfg.window, dtype=dtype
      )
      h_p = h_p + attn.c_proj(o_p.reshape(b, t, d)).astype(f32)
      h_p = h_p + blk.mlp(blk.norm2(h_p)).astype(f32)
  out = h_c if bb.norm is None else bb.norm(h_c)
  return model.head(out).astype(f32)


def _forward_continuations(graphdef, params, model_state, tokens_NW, positions_NC):
  model = nnx.merge(graphdef, params, model_state)
  logits = model(tokens_NW, train=False).astype(jnp.float32)
  return jnp.take_along_axis(logits, positions_NC[:, :, None], axis=1)


def continuation_logits_fn(graphdef, params, model_state, *, pad_id: int):
  """The module docstring's `fn` for a model (`nnx.split` parts); jitted, one compilation per
  shape."""
  model = nnx.merge(graphdef, params, model_state)
  if shares_prefix(model):
    pos_embed = model.backbone.pos_embed
    n_positions = 10**9 if pos_embed is None else pos_embed.num_embeddings
    run = jax.jit(partial(_gpt2_continuations, graphdef))

    def fn(prefixes, lengths, continuations):
      need = int(np.max(lengths)) + continuations.shape[-1]
      if need > n_positions or prefixes.shape[1] > n_positions:
        raise ValueError(f"the model has {n_positions} learned positions but a prompt needs {need}")
      out = run(
        params, model_state, jnp.asarray(prefixes), jnp.asarray(lengths), jnp.asarray(continuations)
      )
      return np.asarray(out)

    return fn
  run = jax.jit(partial(_forward_continuations, graphdef))

  def fn(prefixes, lengths, continuations):
    b, t = prefixes.shape
    _, k, c = continuations.shape
    tokens = np.full((b, k, t + c), pad_id, dtype=np.int32)
    tokens[:, :, :t] = prefixes[:, None]
    for r, n in enumerate(np.asarray(lengths)):
      tokens[r, :, n : n + c] = continuations[r]
    positions = np.asarray(lengths)[:, None, None] + np.arange(c)[None, None]
    positions = np.broadcast_to(positions, (b, k, c)).reshape(b * k, c).astype(np.int32)
    out = run(params, model_state, jnp.asarray(tokens.reshape(b * k, t + c)), positions)
    return np.asarray(out).reshape(b, k, c, -1)

  return fn
