"""``python -m ngramlm``: the ``ngramlm`` program (the same as the installed script).

An entry point, like ``cli.py``: it is the one module of the package that may import the command line.
"""
from cli import main

if __name__ == "__main__":
    main()
