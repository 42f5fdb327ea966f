"""The suite adapters of ci/score_race_suite.py: one module per public labelled suite (where its files are,
how a file is labelled, launched and given inputs), and what they share (run)."""
