"""data_prep.ordered_pool: results in the jobs' order, jobs drawn only a few ahead of the results
taken, the pool closed by closing the generator, and a worker that dies named by an exception
instead of a wait."""

import operator
import os
from concurrent.futures.process import BrokenProcessPool

import pytest

from data_prep import ordered_pool

pytestmark = pytest.mark.multiprocess  # Spawned worker processes.


def test_results_come_in_the_jobs_order_and_jobs_are_drawn_a_few_ahead():
  drawn = []

  def jobs():
    for i in range(1000):
      drawn.append(i)
      yield i

  results = ordered_pool.ordered_map(operator.neg, jobs(), workers=2, ahead=2)
  taken = [next(results) for _ in range(10)]
  assert taken == [-i for i in range(10)]
  assert len(drawn) <= 10 + 2 * 2  # At most `ahead` jobs a worker beyond the results taken.
  results.close()  # Cancels what has not started, waits for what runs.
  assert len(drawn) <= 10 + 2 * 2
  assert list(ordered_pool.ordered_map(operator.neg, range(50), workers=2)) == [
    -i for i in range(50)
  ]
  assert list(ordered_pool.ordered_map(operator.neg, range(5), workers=1)) == [-i for i in range(5)]


def test_a_worker_that_dies_raises_instead_of_waiting():
  with pytest.raises(BrokenProcessPool):
    list(ordered_pool.ordered_map(os._exit, [3], workers=2))
