"""The one module in this project that deletes files: :func:`remove_tree` (directories),
:func:`remove_file` (a writer's own side files) and :func:`prune_empty_dirs` (empty parents only).

Every deletion (purge of a ledger, a writer replacing its own staging output, a store replaced by ``load``) goes
through them with the directory it must stay inside; they refuse anything else. tests/housekeeping/core/test_hostile_names.py
checks with generated hostile paths that nothing outside is ever removed, and that no other module calls a
file-deleting primitive.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from housekeeping.core.errors import PathOutsideStore


def remove_tree(path: Path, *, within: Path, missing_ok: bool = True) -> bool:
    """Delete the directory ``path`` (recursively), which must lie strictly inside ``within`` once both are
    resolved, and must be a real directory (not a symlink, not a file). Returns False when it did not exist."""
    resolved = _inside(path, within)
    if not resolved.exists():
        if missing_ok:
            return False
        raise PathOutsideStore(f"refusing to delete {resolved}: it does not exist")
    if not resolved.is_dir():
        raise PathOutsideStore(
            f"refusing to delete {resolved}: a ledger or staging area is a directory, not a file"
        )
    shutil.rmtree(resolved)
    return True


def _inside(path: Path, within: Path) -> Path:
    base = Path(within).resolve()
    target = Path(path) if Path(path).is_absolute() else base / path
    if target.is_symlink():
        raise PathOutsideStore(f"refusing to delete {target}: it is a symbolic link")
    resolved = target.resolve()
    if resolved == base or base not in resolved.parents:
        raise PathOutsideStore(f"refusing to delete {path}: it is not inside {base}")
    return resolved


def remove_file(path: Path, *, within: Path) -> bool:
    """Delete one regular file strictly inside ``within``. Returns False when it did not exist."""
    resolved = _inside(path, within)
    if not resolved.exists():
        return False
    if not resolved.is_file():
        raise PathOutsideStore(f"refusing to delete {resolved}: not a regular file")
    resolved.unlink()
    return True


def prune_empty_dirs(start: Path, *, within: Path) -> None:
    """Remove ``start`` and its parents while they are empty, stopping below ``within``. ``rmdir`` only removes
    empty directories, so no file can go this way."""
    base = Path(within).resolve()
    current = Path(start).resolve()
    while current != base and base in current.parents:
        try:
            current.rmdir()
        except OSError:  # not empty (or already gone and its parent not empty): stop
            return
        current = current.parent
