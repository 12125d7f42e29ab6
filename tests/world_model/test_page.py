"""The tracking page (`chessjax.world_model.page`) in a real headless browser: it loads with no
console error, a key press moves to the next ply, and the squares of that ply's move change colour
in the screenshot; wrong squares are drawn red on the model's board."""

import json

import numpy as np
import pytest
from browser import Browser

from chessjax import encoding
from chessjax.world_model import page

OPENING = "e2e4 e7e5 g1f3 b8c6 f1b5 a7a6 e1g1".split()
MOVE_COLOUR = (0xF6, 0xD7, 0x43)  # .sq.move in the page's style
WRONG_COLOUR = (0xE8, 0x41, 0x3C)  # .sq.wrong


def _views():
  _, true = encoding.encode_game(OPENING)
  pred = true.copy()
  pred[3:, 0] = 0  # The model loses the rook on a8 from ply 3 on.
  game = page.game_view("opening", OPENING, true, pred)
  other = page.game_view("exact", OPENING[:2], true[:3], true[:3])
  return [game, other]


def test_views_know_the_first_wrong_ply():
  game, other = _views()
  assert game["first_wrong"] == 3 and other["first_wrong"] == -1
  assert game["accuracy"][2] == 1.0 and game["accuracy"][3] == pytest.approx(74 / 75, abs=1e-4)
  assert game["exact_state"] == pytest.approx(3 / 8)


@pytest.mark.browser
def test_page_steps_by_key_in_a_browser(tmp_path):
  path = tmp_path / "page.html"
  path.write_text(page.page_html(_views(), "test <page>"))
  browser = Browser(tmp_path / "profile")
  try:
    browser.open(path.as_uri())
    assert browser.evaluate("document.title") == "test <page>"
    assert browser.evaluate("document.getElementById('status').textContent").startswith("ply 0")

    def colour(shot, board, square):  # A pixel near the square's corner, away from the glyph.
      r = browser.evaluate(
        f"JSON.stringify(document.querySelector('#{board} [data-sq=\"{square}\"]')"
        ".getBoundingClientRect())"
      )
      box = json.loads(r)
      return tuple(int(c) for c in shot[int(box["top"]) + 3, int(box["left"]) + 3])

    e2, e4 = 52, 36  # Label indices (a8 = 0).
    before = browser.screenshot()
    browser.key("ArrowRight", 39)
    status = browser.evaluate("document.getElementById('status').textContent")
    assert status.startswith("ply 1 of 7, move e2e4"), status
    after = browser.screenshot()
    for board in ("true", "pred"):
      for sq in (e2, e4):
        assert colour(before, board, sq) != MOVE_COLOUR
        assert colour(after, board, sq) == MOVE_COLOUR, (board, sq)
    assert not np.array_equal(before, after)

    browser.evaluate("document.getElementById('firstwrong').click()")  # The first wrong ply.
    shot = browser.screenshot()
    assert browser.evaluate("document.getElementById('status').textContent").startswith("ply 3")
    assert colour(shot, "pred", 0) == WRONG_COLOUR and colour(shot, "true", 0) != WRONG_COLOUR
    browser.key("End", 35)
    assert browser.evaluate("document.getElementById('slider').value") == "7"
    assert browser.errors() == []
  finally:
    browser.close()
