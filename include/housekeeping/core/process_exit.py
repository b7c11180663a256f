"""How the project's own processes end: without the interpreter's last garbage collections."""

from __future__ import annotations

import atexit
import gc


def skip_garbage_collection_at_exit() -> None:
    """Freeze every object when the process exits, so the interpreter's teardown does not trace them again.

    A process that imported Great Expectations (the gate's, the CLI's) holds hundreds of thousands of objects, and
    the collections Python runs while it tears its modules down trace them all again, for memory the operating
    system takes back anyway: a delay at the end of every gate a DAG runs. Objects still go by reference counting and every exit handler still
    runs: registered first, this one runs after the others (Spark's, logging's). Only garbage in reference cycles
    is left to the operating system, which takes the whole process's memory back anyway."""
    atexit.register(gc.freeze)
