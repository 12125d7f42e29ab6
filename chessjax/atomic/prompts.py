"""The three prompt conditions of the atomic-chess evaluation (Co & Konuganti 2026, Appendix A).

A condition names the prompt text and the variant its answer is scored under:

  atomic           atomic chess, the six rules stated        -> scored under atomic rules
  atomic_no_rules  atomic chess named, rules omitted (Table 2) -> scored under atomic rules
  chess            standard chess                             -> scored under chess rules

The rule set of standard chess is named "chess" everywhere in the track (the python-chess / UCI
variant name, as in `chessjax.encoding`): conditions, variants, position sources and report
columns. Its old name "standard" is still read wherever a name is read (`variant_of`,
`condition_name`). The templates are the paper's, word for word; `<fen>`, `<color>` and
`<legal_moves>` are filled per position. The paper's models answered through a `submit_move`
tool constrained to the listed moves (Appendix B, `chessjax.atomic.llm`); the sentence asking for
it is kept so prompts stay comparable.
"""

from dataclasses import dataclass

import chess
import chess.variant

from chessjax.encoding import VARIANTS  # ("chess", "atomic"), the python-chess / UCI names

VARIANT_BOARD = {"chess": chess.Board, "atomic": chess.variant.AtomicBoard}
# Names of the rules before the track said "variant": answer files and `--rules` still use them.
_LEGACY_NAMES = {"standard": "chess"}

_ATOMIC_RULES = """\
Atomic chess rules:

1. When a capture occurs, an explosion happens on the destination square.
2. The captured piece, the capturing piece, and all non-pawn pieces on adjacent squares are removed.
3. Pawns adjacent to the explosion square are not removed.
4. Kings cannot make captures.
5. A move is illegal if the explosion removes the moving side's own king.
6. A move is legal and immediately winning if the explosion from a capture removes the opponent's \
king. This happens by capturing a piece adjacent to the king, not by capturing the king itself \
because kings cannot be captured.

"""

_TEMPLATE = """\
You are choosing the best move in {game}.

{rules}Here is the position:

FEN: <fen>

Submit the best {legal}move in UCI notation for <color> in {game} using the `submit_move` tool.

Legal moves in UCI notation:

<legal_moves>
"""

TEMPLATES = {
  "atomic": _TEMPLATE.format(game="Atomic chess", rules=_ATOMIC_RULES, legal=""),
  "atomic_no_rules": _TEMPLATE.format(game="Atomic chess", rules="", legal="legal "),
  "chess": _TEMPLATE.format(game="chess", rules="", legal="legal "),
}
CONDITIONS = tuple(TEMPLATES)
CONDITION_VARIANT = {"atomic": "atomic", "atomic_no_rules": "atomic", "chess": "chess"}


def variant_of(name: str) -> str:
  """A variant of `VARIANTS` from its name or its old name ("standard" -> "chess")."""
  variant = _LEGACY_NAMES.get(name, name)
  if variant not in VARIANTS:
    raise ValueError(f"variant must be one of {VARIANTS} (or 'standard'), got {name!r}")
  return variant


def board_of(fen: str, variant: str) -> chess.Board:
  """The position under a variant's rules (raises ValueError on an unknown variant or bad FEN)."""
  if variant not in VARIANT_BOARD:
    raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
  return VARIANT_BOARD[variant](fen)


def legal_moves(fen: str, variant: str) -> list[str]:
  """Legal UCI moves of the position under the variant, sorted (the order shown in prompts)."""
  return sorted(move.uci() for move in board_of(fen, variant).legal_moves)


def render(condition: str, fen: str) -> str:
  """The prompt of a condition for one position, placeholders filled."""
  condition = condition_name(condition)
  variant = CONDITION_VARIANT[condition]
  color = "White" if board_of(fen, variant).turn == chess.WHITE else "Black"
  return (
    TEMPLATES[condition]
    .replace("<fen>", fen)
    .replace("<color>", color)
    .replace("<legal_moves>", " ".join(legal_moves(fen, variant)))
  )


def condition_name(name: str) -> str:
  """A condition of `CONDITIONS` from its name or its old name ("standard" -> "chess")."""
  condition = _LEGACY_NAMES.get(name, name)
  if condition not in TEMPLATES:
    raise ValueError(f"condition must be one of {CONDITIONS} (or 'standard'), got {name!r}")
  return condition


@dataclass(frozen=True)
class Query:
  """One question: a position under a prompt condition."""

  fen: str
  condition: str
  history: tuple[str, ...] = ()  # UCI moves from the source game's start (offline LM pickers)
  game_variant: str = "chess"  # the rules the history was played under

  @property
  def variant(self) -> str:
    return CONDITION_VARIANT[self.condition]

  @property
  def prompt_kind(self) -> str:
    """The answer row's `prompt` field: `no_rules` for the Table 2 ablation, else `rules`."""
    return "no_rules" if self.condition == "atomic_no_rules" else "rules"

  @property
  def prompt(self) -> str:
    return render(self.condition, self.fen)

  @property
  def legal_moves(self) -> list[str]:
    return legal_moves(self.fen, self.variant)


def answer_row(query: Query, model: str, answer: dict) -> dict:
  """The answer JSON object `chessjax.atomic.report` reads, for every picker (`pickers`, the API
  runs of `llm`): the question (`fen`, `variant`, `prompt`), the `model` that answered, then what
  it answered (`move` and whatever else the picker records)."""
  return {
    "fen": query.fen,
    "variant": query.variant,
    "prompt": query.prompt_kind,
    "model": model,
    **answer,
  }
