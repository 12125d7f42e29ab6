"""GPT-2 language-model training step: chessjax against Hugging Face `GPT2LMHeadModel` (PyTorch),
same configuration and batch, side by side on this CPU.

    python -m benchmarks.bench_lm_vs_hf --peer-python /path/to/venv/bin/python \\
        [--cases mini:60x256,small:8x256] [--warmup 2] [--iters 5] [--reps 2]

The peer (`torch` and `transformers`, installed outside this project's dependencies, e.g.
`python -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers`) runs in its own process.
Each case is a GPT-2 size of `chessjax.models.gpt2.SIZES` (vocabulary 77, 512 positions,
dropout 0.1, LayerNorm eps 1e-5, tanh GELU, tied head) and a batch `BxT` of random token ids
without padding. One step, both sides:

* chessjax: the training loop's own jitted step (`chessjax.step.build` of
  `configs/lm.py:family=gpt2,size=SIZE`): forward in train mode, mean token NLL, backward,
  global-norm clipping 1.0, AdamW (lr 5e-4, betas 0.9/0.999, eps 1e-8, decay 0.01 on every
  parameter) with the linear schedule, the non-finite guard;
* peer: `GPT2LMHeadModel(GPT2Config(...))` in train mode, logits -> mean cross-entropy against the
  same targets, `backward`, `clip_grad_norm_(1.0)`, `torch.optim.AdamW` with the same
  hyperparameters, `LambdaLR` linear schedule, `zero_grad`; its default attention implementation.

Both use every core of the machine (torch's default thread count, XLA's default). Each side
compiles or warms up for `--warmup` steps, then times `--iters` steps, each to completion
(`block_until_ready` / a synchronous CPU step); the table gives the median step time. Sides
alternate (`--reps` times each) so that load on a shared machine hits both.
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PEER = r"""
import json, sys, time, torch, transformers
from transformers import GPT2Config, GPT2LMHeadModel
d, layers, heads, B, T, warmup, iters = (int(x) for x in sys.argv[1:8])
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=77, n_positions=512, n_embd=d, n_layer=layers, n_head=heads,
                 resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1, layer_norm_epsilon=1e-5,
                 activation_function="gelu_new", initializer_range=0.02)
model = GPT2LMHeadModel(cfg).train()
opt = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.999), eps=1e-8,
                        weight_decay=0.01)
total = 1000
sched = torch.optim.lr_scheduler.LambdaLR(
    opt, lambda s: s / 100 if s < 100 else max(0.0, (total - s) / (total - 100)))
g = torch.Generator().manual_seed(1)
inputs = torch.randint(3, 77, (B, T), generator=g)
targets = torch.randint(3, 77, (B, T), generator=g)
times = []
for i in range(warmup + iters):
    t0 = time.perf_counter()
    logits = model(input_ids=inputs).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 77), targets.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    float(loss)
    times.append(time.perf_counter() - t0)
print(json.dumps({"times": times[warmup:], "params": sum(p.numel() for p in model.parameters()),
                  "threads": torch.get_num_threads(), "torch": torch.__version__,
                  "transformers": transformers.__version__,
                  "attn": model.config._attn_implementation}))
"""

OURS = r"""
import json, sys, time
import jax, jax.numpy as jnp, numpy as np
from chessjax import evaluation
from chessjax.models import count_params
from chessjax import workdir
from configs import lm
size, B, T, warmup, iters = sys.argv[1], *(int(x) for x in sys.argv[2:6])
config = lm.get_config(f"family=gpt2,size={size},notation=uci")
config.train.epochs, config.train.steps = 0, 1000
run = workdir.initial(config)
state, fns = run.state, run.fns
rng = np.random.default_rng(1)
batch = {"inputs": rng.integers(3, 77, (B, T)).astype(np.int32),
         "targets": rng.integers(3, 77, (B, T)).astype(np.int32),
         "weights": np.ones((B, T), np.float32), "mask": np.ones((B, T), bool),
         "moves": np.full(B, T / 2, np.float32)}
batch = evaluation.device_batch(batch, fns)
times = []
for i in range(warmup + iters):
    t0 = time.perf_counter()
    state, out = fns.train_step(state, batch)
    jax.block_until_ready((state, out))
    times.append(time.perf_counter() - t0)
print(json.dumps({"times": times[warmup:], "params": count_params(state["params"]),
                  "jax": jax.__version__, "devices": jax.device_count()}))
"""


def run_side(cmd, cwd) -> dict:
  proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
  if proc.returncode:
    sys.exit(f"{cmd[0]} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
  return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--peer-python", required=True, help="python with torch and transformers")
  ap.add_argument("--cases", default="mini:60x256,small:8x256", help="SIZE:BxT,...")
  ap.add_argument("--warmup", type=int, default=2)
  ap.add_argument("--iters", type=int, default=5)
  ap.add_argument("--reps", type=int, default=2)
  args = ap.parse_args(argv)
  sys.path.insert(0, str(REPO))
  from chessjax.models import gpt2

  rows = []
  for case in args.cases.split(","):
    size, shape = case.split(":")
    b, t = (int(x) for x in shape.split("x"))
    d, layers, heads = gpt2.SIZES[size]
    runs = {"peer": [], "chessjax": []}
    for rep in range(args.reps):
      for side in ("peer", "chessjax") if rep % 2 == 0 else ("chessjax", "peer"):
        if side == "peer":
          cmd = [args.peer_python, "-c", PEER, *map(str, (d, layers, heads, b, t))]
        else:
          cmd = [sys.executable, "-c", OURS, size, str(b), str(t)]
        r = run_side([*cmd, str(args.warmup), str(args.iters)], REPO)
        runs[side].append(r)
        print(
          f"{size} {b}x{t} {side:8s} rep {rep}: median step "
          f"{statistics.median(r['times']):.3f} s ({r['params']:,} parameters)",
          flush=True,
        )
    peer, ours = runs["peer"][0], runs["chessjax"][0]
    if peer["params"] != ours["params"]:
      sys.exit(f"{size}: {peer['params']:,} peer parameters vs {ours['params']:,} chessjax")
    med = lambda rs: statistics.median(x for r in rs for x in r["times"])  # noqa: E731
    rows.append((size, b, t, ours["params"], med(runs["peer"]), med(runs["chessjax"]), peer))
  peer = rows[0][-1]
  print(
    f"\nGPT-2 training step, random tokens, no padding; peer: torch {peer['torch']}, transformers "
    f"{peer['transformers']} ({peer['attn']} attention, {peer['threads']} threads); chessjax on "
    f"{ours['devices']} CPU device(s), jax {ours['jax']}; median of {args.iters} x {args.reps} "
    "steps after warm-up\n"
  )
  print("| size | parameters | batch | HF tokens/s | chessjax tokens/s | ratio |")
  print("|---|---:|---|---:|---:|---:|")
  for size, b, t, params, p_s, o_s, _ in rows:
    print(
      f"| {size} | {params:,} | {b}x{t} | {b * t / p_s:,.0f} | {b * t / o_s:,.0f} | "
      f"{p_s / o_s:.2f}x |"
    )
  return 0


if __name__ == "__main__":
  sys.exit(main())
