r"""The language-model runs behind Figure 2 of Toshniwal et al. (2022), as commands.

    python -m launch.lm_sweep --data data/lm [--sets data/probing] [--root runs/lm_rap] \
        [--model gpt2] > lm_rap.sh

For Train-S, M and L: UCI (p = 0) and UCI + RAP at every p of the paper's grid {5, 15, 25, 50,
75, 100}% (`chessjax/lm/paper_results.json`), each trained (`chessjax.main` with configs/lm.py)
then evaluated (`chessjax.lm.evaluate`, with the probing sets when `--sets` is given); the report
(`chessjax.lm.report`) over all of them last: 43 commands, one a line. `--model` is a family of
configs/lm.py. The world model's sweep is `launch.sweep`. Run from the repository root.
"""

import argparse
import json
import sys
from importlib import resources


def paper_grid() -> list[float]:
  """The paper's RAP probabilities p (Figure 2), from the LM track's published numbers."""
  text = resources.files("chessjax.lm").joinpath("paper_results.json").read_text()
  return json.loads(text)["rap_p"]["grid"]


def launch_commands(
  data: str,
  *,
  root: str = "runs/lm_rap",
  sets: str | None = None,
  model: str = "gpt2",
  trains=("S", "M", "L"),
  grid=None,
) -> list[str]:
  """The commands of Figure 2's runs: for each training size, UCI (p = 0) and UCI + RAP at every
  p of the paper's grid, each trained then evaluated; the report last."""
  grid = paper_grid() if grid is None else grid
  out = []
  for train in trains:
    for p in (0.0, *grid):
      if p == 0:
        name, arg = f"{model}_uci_{train}", f"family={model},notation=uci,train={train}"
      else:
        name = f"{model}_rap{round(100 * p)}_{train}"
        arg = f"family={model},notation=rap,rap_p={p:g},train={train}"
      workdir = f"{root}/{name}"
      out.append(
        f"python -m chessjax.main --config=configs/lm.py:{arg} --workdir={workdir} "
        f"--config.data.train={data}"
      )
      out.append(
        f"python -m chessjax.lm.evaluate --workdir {workdir}" + (f" --sets {sets}" if sets else "")
      )
  out.append(f"python -m chessjax.lm.report --runs {root} --out {root}/report")
  return out


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m launch.lm_sweep", description=__doc__.split("\n")[0])
  ap.add_argument("--data", default="data/lm", help="the LM data set")
  ap.add_argument("--sets", default=None, help="the probing sets (chessjax.lm.evaluate --sets)")
  ap.add_argument("--root", default="runs/lm_rap", help="folder of the workdirs")
  ap.add_argument("--model", default="gpt2", help="the model (a family of configs/lm.py)")
  args = ap.parse_args(argv)
  for line in launch_commands(args.data, root=args.root, sets=args.sets, model=args.model):
    print(line)
  return 0


if __name__ == "__main__":
  sys.exit(main())
