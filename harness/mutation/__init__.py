"""Mutation analysis: how many small, plausible bugs in a kernel file the conformance cases catch.

``operators`` makes the mutants of each kernel (source text edits), ``engine`` runs ``qconform check``'s cases
on each with the unmutated run's seed and classifies it, ``summary`` writes mutation.json / mutation.md.
"""
