"""The perplexity accounting and summary, shared by every model family: see :mod:`corpora.accounting`.

It lives below both model families (``ngramlm`` and ``neural`` stand on ``corpora`` and never
import each other); this module keeps the old import path working.
"""
from corpora.accounting import (PerplexityReport, format_report, oov_flags, oov_warning,  # noqa: F401
                                report_from_log10)
