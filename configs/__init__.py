"""ml_collections config files; pass them as `--config=configs/cwm.py:family=slice,size=d256`."""
