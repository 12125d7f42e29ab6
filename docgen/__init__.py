"""The docs' numbers: renderers of the README's and docs/*.md's marked spans from the records
(docs/results/*.json) and the papers' data files, and the check that the docs hold them.

`docs.py` rewrites or checks the spans (`python -m docgen [--check]`); `doc_spans.py` maps each
span's key to its renderer: the world-model page's (`findings.py`, `findings_long.py`), the
performance page's (`perf_spans.py`), the tracks' (`track_spans.py`), the tables written in
records (`record_tables.py`) and docs/claims.md's (`claims.py`).

Like `launch/` and `benchmarks/`, it runs from a checkout. It reads the records, the library and
the tables of the runs it renders (`launch.cwm_tables`, the benchmarks' table writers); nothing
imports it.
"""
