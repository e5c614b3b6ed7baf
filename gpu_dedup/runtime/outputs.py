"""What the tool owns: where outputs may go, directory locks, and the manifest of the files a run wrote.

Where
    ``input_roots`` lists the local paths a source names (files, directories, glob matches; a file's own
    directory is not one of them); ``check_outside_inputs`` refuses an output, work or index directory at or
    under any of them. ``check_directory`` / ``make_directory`` turn an impossible directory (a file in the
    way, no permission, a read-only file system) into one ``OutputPathError`` naming the path and the reason.

Locks
    ``locked(path, what)`` holds ``path/gpu-dedup.lock`` with filelock (an OS-level lock: the kernel releases
    it when the process ends, however it ends) for as long as the block runs; a second holder fails at once
    with ``LockedError``, which names the holder from ``gpu-dedup.lock.info`` (pid, host, start, command,
    written after the lock is taken and removed before it is released). A stale info file of a killed run
    never blocks anything: only the OS lock decides, and the info is read only to word the error. The same
    thread may take a lock it holds again (the CLI holds OUT around the API call that writes into it).

Owned outputs
    ``own`` locks OUT (and the run's work and index directories) and keeps ``OUT/.gpu-dedup-outputs.json``:
    the files the tool wrote there (paths relative to OUT), the command and its state (writing / complete /
    failed). Every file a run writes goes through ``io.atomic_path``, which calls the recorder before the file
    exists; the recorder appends the path to ``OUT/.gpu-dedup-outputs.journal`` (flushed at once), so a run
    killed at any point leaves a complete record. Owning OUT again removes the earlier run's files (never
    anything else, never an input): all of them with ``overwrite``, all but the caches (``work/``, the work
    dir, semantic embeddings) otherwise; a finished earlier run (decisions.parquet) needs ``overwrite`` or
    ``resume``. A run that ends with an exception removes what it wrote (caches aside) and, when it made OUT
    and nothing else is there, OUT itself.
"""
from __future__ import annotations

import datetime as _dt
import glob
import json
import logging
import os
import re
import socket
import sys
import threading
from contextlib import ExitStack, contextmanager
from typing import Any, Iterator, Mapping, Sequence

import filelock

from ..errors import ConfigError, DataError, GpuDedupError, OutputExistsError, RunError
from ..io.remote import is_url
from ..io.write import WRITE_HOOKS, write_json_atomic

logger = logging.getLogger(__name__)

MANIFEST = ".gpu-dedup-outputs.json"
# the files that say a run finished in a directory: a dedup run's decisions, a filter run's scores
# a finished run's per-document tables (every program's): OUT holding one is replaced only with --overwrite
# (the names without .parquet: a Ray run's datasets of per-file parts)
RESULT_FILES = ("decisions.parquet", "scores.parquet", "substring_docs.parquet", "paragraph_docs.parquet",
                "matches.parquet", "decisions", "scores", "substring_docs", "paragraph_docs")
JOURNAL = ".gpu-dedup-outputs.journal"
LOCK = "gpu-dedup.lock"
LOCK_INFO = "gpu-dedup.lock.info"
FORMAT = "gpu_dedup-outputs"
VERSION = 1
STATE_FILES = (MANIFEST, JOURNAL, LOCK, LOCK_INFO)
# kept when a run that is not an --overwrite replaces an earlier one: checksummed, validated on use
CACHES = ("work/", "semantic/embeddings/")
# written into OUT later by other commands, from the files of this run: removed with it
# (a table's key stands for the Ray engine's dataset of it too: OUT/<table>/part-<k>.parquet)
DERIVED = {"semantic_decisions.parquet": ("compare.md", "compare.png")}


class OutputPathError(GpuDedupError, OSError):
    """An output, work or index directory that cannot be one (the message names the path and the reason)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class LockedError(RunError):
    """The directory is locked by another run (the message names the holder when it is recorded)."""


class ManifestError(DataError):
    """A manifest.json that is not the tool's: the message names the file and what is wrong."""


# ---------------------------------------------------------------------------------------------- where

def input_roots(source: Any) -> list[str]:
    """Real paths of the local inputs ``source`` names: files, directories and what glob patterns match
    (directories searched recursively count as a whole). In-memory tables and remote URLs name none."""
    if isinstance(source, (str, os.PathLike)):
        args = [source]
    elif isinstance(source, (list, tuple)):
        args = list(source)
    else:
        return []
    roots: list[str] = []
    for arg in args:
        if not isinstance(arg, (str, os.PathLike)):
            continue
        a = os.fspath(arg)
        if is_url(a):
            continue
        matches = [a] if os.path.exists(a) else (sorted(glob.glob(a, recursive=True)) if glob.has_magic(a) else [])
        roots.extend(os.path.realpath(m) for m in matches)
    return sorted(set(roots))


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def check_outside_inputs(targets: Mapping[str, Any], roots: Sequence[str]) -> None:
    """Refuse any target directory (label -> path or None) at or under an input root (``input_roots``)."""
    for label, target in targets.items():
        if target is None or is_url(os.fspath(target)):
            continue
        real = os.path.realpath(os.fspath(target))
        for root in roots:
            if _within(real, root):
                how = "is the input" if real == root else "lies inside the input"
                raise ConfigError(f"{label} {os.fspath(target)!r} {how} {root!r}: the tool never writes into its "
                                  "inputs (and a later run would read its outputs as input); choose a directory "
                                  "outside them")


def check_directory(path: str, what: str) -> None:
    """Raise ``OutputPathError`` when ``path`` cannot be (or become) a writable directory."""
    if os.path.isdir(path):
        if not os.access(path, os.W_OK | os.X_OK):
            raise OutputPathError(f"{what} {path!r} is not writable (read-only directory or no permission)")
        return
    if os.path.lexists(path):
        raise OutputPathError(f"{what} {path!r} exists and is not a directory; choose a directory path")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise OutputPathError(f"{what} {path!r} cannot be created: {parent!r} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"{what} {path!r} cannot be created: {parent!r} is not writable (read-only "
                              "directory or no permission)")


def make_directory(path: str, what: str) -> None:
    """``os.makedirs`` with the reason of a failure in one ``OutputPathError`` naming the path."""
    check_directory(path, what)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{what} {path!r} cannot be created: {exc.strerror or exc}") from None


# ---------------------------------------------------------------------------------------------- locks

class _Held:
    def __init__(self, lock: Any, thread: int, path: str) -> None:
        self.lock, self.thread, self.path, self.depth = lock, thread, path, 1


_HELD: dict[str, _Held] = {}
_HELD_LOCK = threading.Lock()


def _holder(directory: str) -> str:
    """How the lock info file names the holder, for an error message."""
    try:
        with open(os.path.join(directory, LOCK_INFO), encoding="utf-8") as fh:
            info = json.load(fh)
        pid, host = int(info["pid"]), str(info["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (it has not recorded who it is)"
    text = f"pid {pid} on {host}, started {info.get('started', '?')}"
    if info.get("command"):
        text += f": {info['command']}"
    if host == socket.gethostname() and not _alive(pid):
        text = (f"another process (the last recorded holder, {text}, is gone; the lock is held by a process "
                "that has not recorded itself yet)")
    return text


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _write_info(directory: str) -> None:
    info = {"pid": os.getpid(), "host": socket.gethostname(),
            "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))}
    _write_json(os.path.join(directory, LOCK_INFO), info)


def _write_json(path: str, obj: Any) -> None:
    """The tool's own state files (manifest, lock info): atomic, and not recorded as outputs."""
    write_json_atomic(obj, path, record=False)


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def _try_lock(directory: str) -> Any:
    """filelock's lock of ``directory`` taken without waiting, or None when someone holds it."""
    path = os.path.join(directory, LOCK)
    for _ in range(3):
        lock = filelock.FileLock(path)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            return None
        if os.path.exists(path):
            return lock
        lock.release()  # its file was removed (an emptied directory) between our open and our lock: again
    return None


@contextmanager
def locked(path: str | os.PathLike, what: str) -> Iterator[None]:
    """Hold ``path``'s lock (module docstring) while the block runs; ``path`` is created when missing."""
    path = os.fspath(path)
    key = os.path.realpath(path)
    with _HELD_LOCK:
        held = _HELD.get(key)
        if held is not None and held.thread == threading.get_ident():
            held.depth += 1
    if held is not None:
        if held.thread != threading.get_ident():
            raise LockedError(f"{what} {path!r} is locked by another run in this process (pid {os.getpid()}); "
                              "wait for it to finish or choose another directory")
        try:
            yield
        finally:
            with _HELD_LOCK:
                held.depth -= 1
        return
    make_directory(path, what)
    try:
        lock = _try_lock(path)
    except OSError as exc:
        raise OutputPathError(f"{what} {path!r}: cannot create its lock file {LOCK!r}: "
                              f"{exc.strerror or exc}") from None
    if lock is None:
        raise LockedError(f"{what} {path!r} is locked by {_holder(path)}; wait for that run to finish or "
                          "choose another directory")
    try:
        _write_info(path)
    except OSError:
        lock.release()
        raise
    with _HELD_LOCK:
        _HELD[key] = _Held(lock, threading.get_ident(), path)
    try:
        yield
    finally:
        with _HELD_LOCK:
            del _HELD[key]
        _unlink(os.path.join(path, LOCK_INFO))  # before the release: a next holder's info is never removed
        lock.release()


def _remove_lock_only_dir(directory: str) -> bool:
    """Remove ``directory`` when it holds nothing but an unheld lock (and its info); True when removed."""
    try:
        names = set(os.listdir(directory))
    except OSError:
        return False
    if names - {LOCK, LOCK_INFO}:
        return False
    if names:
        try:
            lock = _try_lock(directory) if LOCK in names else None
        except OSError:
            return False
        if LOCK in names and lock is None:
            return False
        _unlink(os.path.join(directory, LOCK_INFO))
        _unlink(os.path.join(directory, LOCK))
        if lock is not None:
            lock.release()
    try:
        os.rmdir(directory)
        return True
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------- manifests

def read_manifest(path: str, fmt: str, what: str) -> dict[str, Any]:
    """The JSON object in ``path`` when its "format" is ``fmt``; else ``ManifestError`` naming the file and
    what is wrong with it (``what``: e.g. "index")."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path!r} is not a gpu_dedup {what} manifest: invalid JSON ({exc.msg} at line "
                            f"{exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError:
        raise ManifestError(f"{path!r} is not a gpu_dedup {what} manifest: not UTF-8 text") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path!r} is not a gpu_dedup {what} manifest: it holds a JSON "
                            f"{type(data).__name__}, not an object")
    if "format" not in data:
        raise ManifestError(f"{path!r} is not a gpu_dedup {what} manifest: it has no \"format\" key "
                            f"(expected {fmt!r})")
    if data["format"] != fmt:
        raise ManifestError(f"{path!r} is not a gpu_dedup {what} manifest: its format is {data['format']!r}, "
                            f"not {fmt!r}")
    return data


def require_keys(data: Mapping[str, Any], keys: Sequence[str], path: str, what: str) -> None:
    missing = [k for k in keys if k not in data]
    if missing:
        raise ManifestError(f"{what} manifest {path!r} lacks the key(s) {', '.join(repr(k) for k in missing)}; "
                            "it is damaged or was not written by gpu_dedup")


def _read_owned(out: str) -> tuple[dict[str, Any] | None, set[str]]:
    """The output manifest of ``out`` (None when absent) and every file it and the journal list."""
    path = os.path.join(out, MANIFEST)
    manifest = None
    files: set[str] = set()
    if os.path.exists(path):
        manifest = read_manifest(path, FORMAT, "output")
        require_keys(manifest, ("version", "files"), path, "output")
        if not isinstance(manifest["files"], list):
            raise ManifestError(f"output manifest {path!r}: \"files\" is not a list")
        files.update(str(f) for f in manifest["files"])
        derived = manifest.get("derived", [])
        files.update(str(f) for f in (derived if isinstance(derived, list) else []))
    try:
        with open(os.path.join(out, JOURNAL), encoding="utf-8") as fh:
            files.update(line.rstrip("\n") for line in fh if line.strip())
    except FileNotFoundError:
        pass
    for f in files:
        if os.path.isabs(f) or ".." in f.split("/"):
            raise ManifestError(f"output manifest of {out!r} lists {f!r}, which is not a path inside it")
    return manifest, files


_TMP = re.compile(r"\.(.+)\.[0-9a-f]{12}\.tmp$")  # io.atomic_path's temporaries: .<name>.<12 hex>.tmp


def _remove_files(out: str, rels: Sequence[str]) -> int:
    """Remove OUT/rel for every rel, and the temporaries ``io.atomic_path`` left for them (a run killed while
    writing), then the directories they leave empty (a directory holding only an unheld lock counts)."""
    by_dir: dict[str, set[str]] = {}
    for rel in rels:
        d, base = os.path.split(os.path.join(os.path.abspath(out), *rel.split("/")))
        by_dir.setdefault(d, set()).add(base)
    removed = 0
    for d, names in by_dir.items():
        try:
            present = os.listdir(d)
        except OSError:
            continue
        for n in present:
            m = _TMP.match(n)
            if n in names or (m and m.group(1) in names):
                p = os.path.join(d, n)
                if os.path.isfile(p) or os.path.islink(p):
                    os.unlink(p)
                    removed += 1
    root = os.path.abspath(out)
    for d in sorted(by_dir, key=len, reverse=True):
        while _within(d, root) and d != root and _remove_lock_only_dir(d):
            d = os.path.dirname(d)
    return removed


class OutputSession:
    """OUT while one run writes there (``own``)."""

    def __init__(self, out: str, command: str) -> None:
        self.out = out
        self.root = os.path.abspath(out)
        self.command = command
        self.files: set[str] = set()      # owned files of earlier runs still there (caches)
        self.recorded: set[str] = set()   # written by this run
        self.caches: tuple[str, ...] = CACHES
        self._journal: Any = None
        self._lock = threading.Lock()
        self.started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    def _manifest(self, state: str, files: set[str], derived: Sequence[str] = ()) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "state": state, "command": self.command,
                "pid": os.getpid(), "host": socket.gethostname(), "started": self.started,
                "updated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "note": "files the gpu_dedup run wrote here (relative paths); `--overwrite` removes exactly "
                        "these, never other files", "files": sorted(files), "derived": sorted(derived)}

    def record(self, final: str) -> None:
        """WRITE_HOOKS entry: journal ``final`` when it lies in OUT (before the file exists)."""
        if not final.startswith(self.root + os.sep):
            return
        rel = os.path.relpath(final, self.root).replace(os.sep, "/")
        if rel in STATE_FILES:
            return
        with self._lock:
            if rel in self.recorded or self._journal is None:
                return
            self._journal.write(rel + "\n")
            self._journal.flush()
            self.recorded.add(rel)

    def _is_cache(self, rel: str) -> bool:
        return any(rel.startswith(c) for c in self.caches)

    def _exists(self, rels) -> set[str]:
        return {r for r in rels if os.path.lexists(os.path.join(self.root, *r.split("/")))}

    def start(self, overwrite: bool, resume: bool, roots: Sequence[str], flag: str,
              overwrite_same_command: bool) -> None:
        manifest, old = _read_owned(self.out)
        if overwrite_same_command and manifest is not None and manifest.get("command") == self.command:
            overwrite = True
        result = next((f for f in RESULT_FILES if os.path.exists(os.path.join(self.out, f))), None)
        if result is not None and not (overwrite or resume):
            raise OutputExistsError(f"{self.out!r} already holds the results of an earlier run ({result}); "
                                    f"pass {flag} to replace them (every file that run wrote, and nothing else) or "
                                    "choose another output directory")
        if manifest is None and result is not None:
            logger.warning("%s holds a run without an output manifest (an older gpu_dedup?): the new run replaces "
                           "the files it writes; other files of that run stay", self.out)
        keep = {r for r in old if self._is_cache(r)} if (resume or not overwrite) else set()
        remove = sorted(old - keep)
        for rel in remove:
            real = os.path.realpath(os.path.join(self.root, *rel.split("/")))
            for r in roots:
                if _within(real, r):
                    raise ConfigError(f"{os.path.join(self.out, rel)!r}, written by the earlier run in {self.out!r}, "
                                      f"is an input of this run ({r!r}); replacing that run would delete it: "
                                      "choose another output directory")
        if remove:
            _write_json(os.path.join(self.out, MANIFEST), self._manifest("replacing", old))
            n = _remove_files(self.out, remove)
            logger.info("%s: removed %d file(s) of the earlier run", self.out, n)
        self.files = self._exists(keep)
        _write_json(os.path.join(self.out, MANIFEST), self._manifest("writing", self.files))
        self._journal = open(os.path.join(self.out, JOURNAL), "w", encoding="utf-8")
        WRITE_HOOKS.append(self.record)

    def _stop_recording(self) -> None:
        if self.record in WRITE_HOOKS:
            WRITE_HOOKS.remove(self.record)
        with self._lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None

    def finish(self, state: str = "complete") -> None:
        """The run ended: its files are recorded as ``state`` ("complete"; "stopped": a guard stopped it and its
        outputs stay for inspection, ``own``)."""
        self._stop_recording()
        files = self._exists(self.files | self.recorded)
        derived = [d for f, ds in DERIVED.items()
                   if f in files or any(x.startswith(f.removesuffix(".parquet") + "/") for x in files) for d in ds]
        _write_json(os.path.join(self.out, MANIFEST), self._manifest(state, files, derived))
        _unlink(os.path.join(self.out, JOURNAL))

    def abort(self) -> None:
        """After an exception: remove what this run wrote (caches aside)."""
        self._stop_recording()
        written = sorted(r for r in self.recorded if not self._is_cache(r))
        if written:
            _remove_files(self.out, written)
        files = self._exists(self.files | self.recorded)
        if files:
            _write_json(os.path.join(self.out, MANIFEST), self._manifest("failed", files))
        else:
            _unlink(os.path.join(self.out, MANIFEST))
        _unlink(os.path.join(self.out, JOURNAL))


_SESSIONS: dict[str, OutputSession] = {}


def open_sessions() -> dict[str, OutputSession]:
    """The output sessions open now (OUT's real path -> its session), a copy: what the cost meter counts as
    written (``cost.Meter``)."""
    return dict(_SESSIONS)


@contextmanager
def own(out: str | os.PathLike | None = None, *, work_dir: str | os.PathLike | None = None,
        index_dir: str | os.PathLike | None = None, command: str, overwrite: bool, resume: bool = False,
        roots: Sequence[str] = (), flag: str = "--overwrite",
        overwrite_same_command: bool = False) -> Iterator[OutputSession | None]:
    """Own the directories a run writes while the block runs (module docstring): check that each can be a
    directory, lock OUT, the index and the work directory (in that order, all before anything is removed),
    then replace the earlier run's files in OUT and record this run's; on success OUT's manifest says
    "complete", on an exception this run's files are removed again. ``work_dir``: a cache kept unless
    ``overwrite`` without ``resume``; ``overwrite_same_command``: replace an earlier run of the same command
    without ``overwrite`` (the demo). Nested in a block of the same thread for the same OUT, it joins that
    block's session. Directories this call made and left holding nothing but their lock are removed (OUT
    only when the run wrote nothing there). An exception with a true ``keep_outputs`` attribute (a guard that
    stopped the run: ``sources.SourceRemovalError``) keeps this run's files, recorded as "stopped"."""
    dirs = [(os.fspath(p), what) for p, what in ((out, "output directory"), (index_dir, "index directory"),
                                                 (work_dir, "work directory")) if p is not None]
    key = os.path.realpath(os.fspath(out)) if out is not None else None
    held = _HELD.get(key) if key is not None else None
    if key in _SESSIONS and held is not None and held.thread == threading.get_ident():
        with ExitStack() as stack:
            for p, what in dirs[1:]:
                stack.enter_context(locked(p, what))
            yield _SESSIONS[key]
        return
    for p, what in dirs:
        check_directory(p, what)
    created = sorted((p for p, _ in dirs if not os.path.lexists(p)), key=lambda p: -len(os.path.abspath(p)))
    wrote: list[str] = []
    try:
        with ExitStack() as stack:
            for p, what in dirs:
                stack.enter_context(locked(p, what))
            if out is None or key is None:
                yield None
                return
            session = OutputSession(os.fspath(out), command)
            if work_dir is not None:
                wd = os.path.realpath(os.fspath(work_dir))
                if _within(wd, key) and wd != key:
                    session.caches = CACHES + (os.path.relpath(wd, key).replace(os.sep, "/") + "/",)
            _SESSIONS[key] = session
            try:
                try:
                    session.start(overwrite, resume, roots, flag, overwrite_same_command)
                except BaseException:
                    session._stop_recording()
                    raise
                try:
                    yield session
                except BaseException as exc:
                    if getattr(exc, "keep_outputs", False):  # a guard stopped the run: its outputs are the evidence
                        session.finish("stopped")
                    else:
                        session.abort()
                    raise
                session.finish()
            finally:
                del _SESSIONS[key]
                wrote.extend(session.recorded)
    finally:
        for p in created:  # a run that failed before writing anything leaves no directory behind
            if not (wrote and out is not None and p == os.fspath(out)):
                _remove_lock_only_dir(p)
