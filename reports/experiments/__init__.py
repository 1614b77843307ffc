"""What a comparison computes, apart from how it is shown: the run's shared machinery
(:mod:`~reports.experiments.run`), its data, settings, result cache and bootstrap intervals, the
n-gram, neural and ∞-gram parts, the interpolation analysis, the adaptation ladder and the
parallel-corpus run.  Nothing here renders a page.
"""
