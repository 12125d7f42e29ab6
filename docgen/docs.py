"""The docs' numbers, rendered from the records: every `<!-- KEY -->...<!-- /KEY -->` span of the
README and docs/*.md is the output of one renderer of `SPANS`, computed from docs/results/*.json
and the papers' data files.

    python -m docgen            # rewrite every span from the records
    python -m docgen --check    # exit 1 and name the spans that differ

A span on one line is inline (its text replaced as is); a span whose text starts on the line
after its marker is a block (the rendering between two newlines). tests/test_results_records.py
asserts that every span of `DOCS` is its rendering, that every renderer has its span, and that
the prose outside the spans keeps at most `MAX_DECIMALS` decimal numbers per document.
"""

import argparse
import re
import sys
from pathlib import Path

from docgen import doc_spans

REPO = Path(__file__).resolve().parents[1]
DOCS = (
  "README.md",
  "docs/world_model.md",
  "docs/lm.md",
  "docs/atomic.md",
  "docs/performance.md",
  "docs/claims.md",
)
SPAN = re.compile(r"<!-- ([\w:.-]+) -->(.*?)<!-- /\1 -->", re.S)
# A number with a fractional part, signed or not, with an exponent or an "x" (a ratio) after it;
# not a version (1.11.2), not part of a name (gpt-5.4, d128.5), not a path or a URL.
DECIMAL = re.compile(r"(?:(?<=[^\w.\-/])|^)[-+]?\d[\d,]*\.\d+(?:e[-+]?\d+)?(?!\.?\d|[a-wyzA-Z_])")
MAX_DECIMALS = 20
SPANS = doc_spans.SPANS


def render(key: str) -> str:
  """The text of span `key`, without the newlines that frame a block."""
  if key not in SPANS:
    raise KeyError(f"no renderer for the span {key!r} (docgen.doc_spans.SPANS)")
  return SPANS[key]().strip("\n")


def rewrite(text: str) -> str:
  """`text` with every span's content replaced by its rendering."""

  def one(m: re.Match) -> str:
    key, old = m.group(1), m.group(2)
    body = render(key)
    if old.startswith("\n"):
      body = f"\n{body}\n"
    return f"<!-- {key} -->{body}<!-- /{key} -->"

  return SPAN.sub(one, text)


def spans(text: str) -> list[tuple[str, str]]:
  """(key, content) of every span of `text`, in order (a key may come twice: its one rendering)."""
  return [(m.group(1), m.group(2)) for m in SPAN.finditer(text)]


def outside(text: str) -> str:
  """`text` without its spans: the hand-written prose."""
  return SPAN.sub("", text)


def decimals(text: str) -> list[str]:
  """The decimal numbers of the prose outside the spans (`DECIMAL`), code blocks included."""
  return DECIMAL.findall(outside(text))


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a span differs")
  args = ap.parse_args(argv)
  stale = []
  for doc in DOCS:
    path = REPO / doc
    text = path.read_text()
    new = rewrite(text)
    if new != text:
      pairs = zip(spans(text), spans(new), strict=True)
      stale += [f"{doc}: {k}" for (k, old), (_, now) in pairs if old != now]
      if not args.check:
        path.write_text(new)
  for line in stale:
    print(("differs: " if args.check else "rewrote: ") + line)
  return 1 if args.check and stale else 0


if __name__ == "__main__":
  sys.exit(main())
