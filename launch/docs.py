"""`python -m launch.docs [--check]`: the docs renderer's earlier command, the same as
`python -m docgen [--check]` (docgen/docs.py)."""

import sys

from docgen.docs import main

if __name__ == "__main__":
  sys.exit(main())
