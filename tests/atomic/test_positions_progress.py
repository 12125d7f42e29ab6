"""The positions command's progress lines: rates and time left, from a scripted clock."""

from collections import Counter

from data_prep import atomic_positions


def test_progress_lines_give_rates_and_time_left():
  now = [0.0]
  lines = []
  progress = atomic_positions.Progress(
    ["chess", "atomic"], 100, clock=lambda: now[0], emit=lines.append
  )
  counts = Counter({r: 0 for r in atomic_positions.REASONS})
  progress.update("chess", counts, 0)
  assert lines[-1].endswith("about ? left")  # nothing kept yet: no estimate
  # 10 minutes: 40 candidates labelled (10 kept, 20 mates, 10 small drops), 3 too short (not
  # labelled). 190 positions to go at 1 per minute.
  now[0] = 600.0
  counts.update(kept=10, mate=20, small_drop=10, too_short=3)
  progress.update("chess", counts, 10)
  assert lines[-1] == (
    "chess: kept 10/100, 40 candidates labelled (4.0/min, 60 kept/h), elapsed 10m00s, "
    "about 3h10m left"
  )
  # The first source done after 100 minutes; the second's estimate uses the whole run's rate.
  now[0] = 6000.0
  counts.update(kept=90)
  progress.update("chess", counts, 100, done=True)
  now[0] = 7200.0
  other = Counter({r: 0 for r in atomic_positions.REASONS})
  other.update(kept=20, same_best=5)
  progress.update("atomic", other, 20)
  assert lines[-1] == (
    "atomic: kept 20/100, 25 candidates labelled (0.2/min, 60 kept/h), elapsed 2h00m, "
    "about 1h20m left"
  )


def test_old_source_name_is_read():
  args = atomic_positions.parse_args(["--out", "x", "--sources", "standard", "atomic"])
  assert args.sources == ["chess", "atomic"]
  args = atomic_positions.parse_args(["--out", "x", "--standard-pgn", "g.pgn"])
  assert args.chess_pgn == ["g.pgn"]
