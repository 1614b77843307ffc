"""The neural half of the command line (click commands): ``neural ...`` and ``seq2seq ...``.
Only ``cli.py`` imports these modules.
"""
