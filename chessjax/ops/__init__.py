"""Pure numeric cores of the sequence mixers: recurrences as functions of arrays."""
