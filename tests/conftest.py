"""Shared test configuration."""
import os

from hypothesis import HealthCheck, settings

# Deterministic, bounded property tests in CI; the seed of a failure is printed by hypothesis.
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
