"""The Chess-World-Model grid: (d, layers, heads) per size (Walker & Lyons, appendix B.2), the size
table of every world-model family (a family module with sizes of its own, e.g. GPT-2, has its own
`SIZES`)."""

SIZES = {"d128": (128, 1, 2), "d256": (256, 2, 4), "d384": (384, 4, 6), "d512": (512, 6, 8)}
