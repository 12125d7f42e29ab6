"""Prefix-bin curves (ExactState and Labelwise per 20-step bin) as figures or image arrays."""

import io

import numpy as np

from chessjax import plotting


def prefix_bins_figure(results: dict[str, dict], title: str = ""):
  """One line per named metrics dict (`chessjax.world_model.metrics`): ExactState and Labelwise
  by bin."""
  fig, axes = plotting.subplots(1, 2, figsize=(10, 3.6), dpi=100)
  for name, result in results.items():
    bins = result["bins"]
    x = np.asarray(bins["start"])
    for ax, key in zip(axes, ("exact_state", "labelwise"), strict=True):
      y = np.array([np.nan if v is None else 100 * v for v in bins[key]], dtype=float)
      ax.plot(x, y, marker=".", label=name)
  for ax, label in zip(axes, ("ExactState (%)", "Labelwise (%)"), strict=True):
    ax.set_xlabel("prefix length t (start of 20-step bin)")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
  axes[0].legend(fontsize=8)
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  return fig


def prefix_bins_image(result: dict, name: str) -> np.ndarray:
  """The curves of one metrics dict as an RGB uint8 array [H, W, 3] (for TensorBoard)."""
  fig = prefix_bins_figure({name: result})
  buf = io.BytesIO()
  fig.savefig(buf, format="raw")
  width, height = fig.canvas.get_width_height()
  return np.frombuffer(buf.getvalue(), np.uint8).reshape(height, width, 4)[..., :3].copy()
