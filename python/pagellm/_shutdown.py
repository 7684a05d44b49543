"""Engines still alive when the interpreter exits are shut down first (atexit), so that the
threads of a tensor-parallel engine (its ranks 1..N-1) stop on rank 0's word instead of being
left to the interpreter's teardown."""

import atexit
import weakref

_LIVE: "weakref.WeakSet" = weakref.WeakSet()


def register(engine) -> None:
    """`engine` has a shutdown() method; it is called at exit unless the engine is gone."""
    _LIVE.add(engine)


@atexit.register
def _shutdown_all() -> None:
    for engine in list(_LIVE):
        try:
            engine.shutdown()
        except Exception:  # noqa: BLE001 - exit goes on for the others
            pass
