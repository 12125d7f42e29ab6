"""Blindfolded chess language model (Toshniwal et al. 2022, "Learning Chess Blindfolded").

`tokens`: the 77-token UCI vocabulary, tokenisation, piece letters read off stored states, RAP/AP
training rows, piece-logit masking and per-move perplexity. `probing`: the board-state probing
prompts (End/Start, Actual/Other) and their scorer (ExM, LgM, R-precision, error categories).
"""
