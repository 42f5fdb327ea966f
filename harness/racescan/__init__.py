"""Race scanning of arbitrary kernels: run one kernel of a CUDA source on a backend with inputs generated from
a recorded seed, and classify what the backend reports (race, order-dependent result, other fault, clean,
cannot run). In: a source,
a kernel name, a launch and argument specs (`spec`), or a labelled corpus file whose header carries them
(`corpus`). Out: a `Verdict`. `sweep` launches over the domain of scalar parameters, for races at one value;
`reading` says which races count for a verifier's narrower notion of a race.
Used by `qconform racescan`, the race corpus tests and the scoring of public labelled suites."""
from .corpus import CorpusEntry, LaunchLine, parse_launch, read_entry, read_header
from .reading import MEMORY_MODEL, Reading
from .scan import KINDS, RACE_FAULTS, Verdict, classify, has_detector, scan
from .spec import ArgSpec, make_args, parse_args
from .sweep import SWEEP_LIMIT, scan_points, sweep, sweep_points

__all__ = ["ArgSpec", "CorpusEntry", "KINDS", "LaunchLine", "RACE_FAULTS", "SWEEP_LIMIT", "Verdict", "classify",
           "has_detector", "make_args", "MEMORY_MODEL", "parse_args", "Reading", "parse_launch", "read_entry", "read_header", "scan", "scan_points",
           "sweep", "sweep_points"]
