"""The report says where kernels were timed, against what copy bandwidth, and why a case's timing was skipped."""
from __future__ import annotations

from harness.reports.document import markdown
from harness.reports.writer import timing_section


def test_timing_section_names_skipped_cases_and_the_reason():
    rows = [{"case": "a", "kernel_ms": 0.01, "notes": ["timing: 0.01 ms per launch, median of 5 batches"]},
            {"case": "b", "kernel_ms": None,
             "notes": ["timing skipped: process 42 (timing) kept the device busy for more than 120 s"]}]
    text = markdown(timing_section({"copy_bandwidth_gbps": 3900.0}, rows))
    assert "## Timing" in text and "3.9e+03 GB/s" in text
    assert "1 of 2 cases timed" in text
    assert "`b`: timing skipped: process 42 (timing) kept the device busy" in text and "`a`" not in text


def test_timing_section_reports_an_unmeasured_copy_bandwidth():
    text = markdown(timing_section({"copy_bandwidth_note": "device copy bandwidth not measured: busy"},
                                    [{"case": "a", "kernel_ms": None, "notes": []}]))
    assert "device copy bandwidth not measured: busy" in text and "0 of 1 cases timed" in text


def test_no_timing_section_where_nothing_was_timed():
    assert timing_section({"backend": "emu"}, [{"case": "a", "kernel_ms": None, "notes": ["emu: 5 schedules"]}]) == []
