"""The interface between a run and where its units are judged (harness.judging.executors): the work a
worker does, a session's results, and a unit no worker finished."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence


@dataclass(frozen=True)
class Work:
    setup: Callable[[], Any]                 # one worker's state (has .close()); picklable for a cluster
    run: Callable[[Any, Any, Any], Any]      # run(state, context, unit) -> result; picklable for a cluster
    context: Any                             # read-only data every unit needs, shipped once per worker


@dataclass(frozen=True)
class Lost:
    """A unit no worker finished: its worker died on every try."""
    reason: str


class Session:
    retried = 0

    def results(self, units: Sequence) -> Iterator[tuple[int, Any]]:
        raise NotImplementedError
