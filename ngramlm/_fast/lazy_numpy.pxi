# Included by every unit, not cimported: a Python-level class, and each module needs its own, since
# it rebinds the including module's global ``np``.

class _LazyNumpy:
    """numpy, imported where this module first uses it: the state API over a KenLM binary
    (``ngramlm.kenlm``) never does, so a decoder that only scores pays neither numpy's import time
    nor its memory (about 23 MB), as with the kenlm module."""

    def __getattr__(self, name):
        import numpy
        globals()["np"] = numpy  # later lookups find numpy itself
        return getattr(numpy, name)


np = _LazyNumpy()
