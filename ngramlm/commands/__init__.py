"""The n-gram half of the command line (click commands): ``train``, ``ppl``, ``score``, ``generate``,
``build-binary``, ``mix``, ``prune``, ``filter``, ``infini`` and ``stats``.

Only ``cli.py`` imports these modules; they parse options, call the library and print.
"""
