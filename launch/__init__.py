"""Launching chessjax runs: Cloud TPU VM and single-GPU scripts, and the paper's sweep as commands.

`tpu_vm.sh` and `gpu_host.sh` wrap gcloud and the training entry point (`--dry-run` prints what they
would run); `sweep.py` emits the stage-1 and stage-2 runs of Walker & Lyons's appendix C;
`cwm_mini.py` runs the d128 ranking at CPU scale and renders its tables. See `launch/README.md`.
"""
