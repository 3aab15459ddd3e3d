"""Other memory libraries' shapes over jiyi's own API.

* :mod:`jiyi.compat.mem0`: mem0's ``Memory`` / ``AsyncMemory`` (names, arguments, plain
  dict results), so code written for mem0 runs on jiyi with its import changed.
* :mod:`jiyi.compat.importers`: a mem0 export and a Letta Agent File's memory blocks,
  read into jiyi (``jiyi import --from mem0|letta FILE``).
"""
