"""The top of the command line, where both model families meet: ``compare``, ``report``, ``ladder``
and ``bert``.  Only ``cli.py`` imports these modules.
"""
