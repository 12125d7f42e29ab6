"""Layout of the 75 state labels and of the 1878-wide output head (Walker & Lyons,
Chess-World-Model, section 2.3, appendix A.1, and the per-label heads of section 3.1).

Label index -> meaning:
  0..63   squares a8, b8, ..., h8, a7, ..., h1 (13 classes: empty, PNBRQK, pnbrqk)
  64      side to move (2)
  65..68  castling rights K, Q, k, q (2 each)
  69      en-passant file (9: none, a..h)
  70      en-passant rank (3: none, rank 3, rank 6)
  71, 72  halfmove clock high, low byte (256 each)
  73, 74  fullmove number high, low byte (256 each)

The head emits the labels' logits back to back in label order, so label j's logits live at
`[HEAD_OFFSETS[j], HEAD_OFFSETS[j] + LABEL_CLASSES[j])`.
"""

import numpy as np

NUM_LABELS = 75
NUM_PIECE_CLASSES = 13

LABEL_CLASSES = np.array([13] * 64 + [2] + [2] * 4 + [9, 3] + [256] * 4, dtype=np.int32)
HEAD_OFFSETS = np.concatenate([[0], np.cumsum(LABEL_CLASSES)[:-1]]).astype(np.int32)
HEAD_DIM = int(LABEL_CLASSES.sum())  # 1878
MAX_CLASSES = int(LABEL_CLASSES.max())  # 256

# Named groups: (name, first label, number of labels, classes per label).
GROUPS = (
  ("pieces", 0, 64, 13),
  ("side", 64, 1, 2),
  ("castling", 65, 4, 2),
  ("ep_file", 69, 1, 9),
  ("ep_rank", 70, 1, 3),
  ("halfmove", 71, 2, 256),
  ("fullmove", 73, 2, 256),
)


def group_logits(logits):
  """(logits [..., count, classes], first label, count, classes) for each label group of head
  logits [..., 1878]; numpy or jax arrays."""
  start = 0
  for _, first, count, classes in GROUPS:
    group = logits[..., start : start + count * classes]
    yield group.reshape(*logits.shape[:-1], count, classes), first, count, classes
    start += count * classes


def argmax_labels(logits):
  """Predicted class of each of the 75 labels, int[..., 75], from head logits [..., 1878].

  The same argmax as the metrics use, so a label is listed wrong iff it is scored wrong.
  """
  out = [group.argmax(axis=-1) for group, *_ in group_logits(logits)]
  if isinstance(logits, np.ndarray):
    return np.concatenate(out, axis=-1)
  import jax.numpy as jnp  # Only for jax arrays: data-preparation workers import this module.

  return jnp.concatenate(out, axis=-1)


assert HEAD_DIM == 1878
assert sum(n for _, _, n, _ in GROUPS) == NUM_LABELS
