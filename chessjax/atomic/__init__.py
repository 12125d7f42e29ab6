"""The atomic-chess evaluation track: does a move-picker compose an explicit rule change?

Co & Konuganti, *Atomic Chess Reveals Compositional Reasoning Failures in LLMs* (ICML 2026
workshop), ask LLMs for the best move in positions whose best move differs between standard and
atomic chess, and score the answers by the Win% the move loses against an engine's best line
(Stockfish under standard rules, Fairy-Stockfish under atomic rules). This package rebuilds that
evaluation so any move-picker can be scored offline:

  engines   locate and run Stockfish / Fairy-Stockfish (`EnginePool`), one pool per variant
  cache     `AnalysisCache`, the persistent sqlite store of engine analyses
  prompts   the paper's three prompt templates (Appendix A) and legal moves per variant
  scoring   Win% (Equation 2), move-quality categories (Equation 3), bootstrap CIs, answer scoring
  report    per-model summary, Markdown (Table 1 columns), figure (Figure 1), latency and tokens
            (Tables 4 and 5); scoring CLI
  llm       the paper's language models through the OpenAI and Anthropic APIs (or any
            OpenAI-compatible server): `submit_move` tool, retries, resumable runs
  answer_log  the append-only answer file a killed run resumes
  lm_picker the offline move-picker of a chessjax language model (the blindfolded-chess track)
  pickers   random, engine, API and language-model move-pickers that write answer files; CLI

The positions themselves come from `data_prep.atomic_positions` (the paper's section 3
variant-divergence filter). The rules of a position are named by a variant, "chess" or "atomic",
as in `chessjax.encoding`, and so are prompt conditions, position sources and report columns;
answer files written before that rename carry `ruleset` ("standard" or "atomic"), and every name
"standard" (a condition, a source, `--rules`) is still read as "chess".
"""
