"""Emitters: Python code that writes the CUDA C of every kernel family, per numeric mode and shape set.

Emitters never import the reference math or the harness; what they share with the harness is the
contract vocabulary in :mod:`emitters.contract`.
"""
