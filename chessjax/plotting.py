"""matplotlib with its headless Agg backend: every track draws its figures through this `plt`.

Training hosts and CI have no display, so the backend is chosen here, once, before pyplot loads;
a module that draws imports `from chessjax.plotting import plt` and writes the figure with
`chessjax.files.write_figure`.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["plt"]
