"""`python -m docgen [--check]`: rewrite (or check) every span of the docs from the records."""

import sys

from docgen.docs import main

if __name__ == "__main__":
  sys.exit(main())
