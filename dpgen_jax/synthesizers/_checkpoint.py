"""Private training checkpoints: resume a fit without spending privacy twice. See
``docs/checkpoints.md``.

A fit with ``checkpoint_dir=D`` writes, with ``orbax.checkpoint.CheckpointManager``, numbered
checkpoints into ``D``: the fit's secret key (the root from which every initialisation, sampling
and noise key derives), the state of every training phase started so far (parameters, optimizer
states, step counts; a finished phase's final state), and a JSON manifest (method, resolved
configuration, noise multipliers, target, schema, N, a keyed fingerprint of the encoded rows, the
phase being run). Orbax writes each checkpoint into a temporary directory and renames it when
complete, so a crash leaves the previous checkpoint intact.

``fit(..., checkpoint_dir=D, resume=True)`` checks that the data, method, configuration, target
and seed are those of the checkpoint, takes the key back and runs the method's training again
from the start: every mechanism before the saved point is replayed with the same key on the same
inputs (the same output, so nothing new is released) or skipped by restoring its saved state, and
each phase continues from its saved step. The checkpoint is secret (it holds the key and states
trained on private rows) and is never part of a release.

Permissions (POSIX): the directory is kept at mode 0700 and nothing in it keeps a group or other
permission bit. A directory created beforehand with looser bits is tightened with a
``UserWarning`` (or refused, naming the fix, if this process cannot change its mode). Orbax writes
its files itself, partly in background threads and with the process umask (0644 files), so after
every completed save, and when the checkpoints are closed, the whole tree is walked and every
group and other bit is removed; until then those files sit in the 0700 directory, which nobody
else can enter. The umask is left alone: it is process-wide, and orbax's writer threads would
race with any other thread of the program that creates files.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import pathlib
import stat
import warnings
from typing import Any

import jax
import numpy as np

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd, privacy
from dpgen_jax._versions import library_versions

FORMAT = "dpgen_jax.checkpoint"
FORMAT_VERSION = 1
MAX_TO_KEEP = 2
SECRET_NOTE = (
    "SECRET: this directory holds a training's secret key and network states trained on private "
    "rows, without any differential-privacy guarantee of their own. Never publish or share it; "
    "delete it (or keep it protected) once training has finished. The released model is the file "
    "written by save(), which holds none of this.")
README = "SECRET-README.txt"
DIR_MODE = 0o700  # the checkpoint directory and every directory in it; files keep only owner bits
_OPEN_BITS = 0o077  # group and other permission bits


class FitPaused(RuntimeError):
    """A checkpointed fit stopped by its time budget: its state is saved, nothing was released.

    Resume it with the same arguments and ``resume=True``.

    Attributes:
        directory: the checkpoint directory.
        phase: the training phase that was running.
        done: the units of that phase executed (steps, or iterations for a GAN phase).
        total: the units the phase plans.
    """

    def __init__(self, directory: str, phase: str, done: int, total: int, reason: str):
        self.directory, self.phase, self.done, self.total = directory, phase, done, total
        super().__init__(
            f"The fit was paused ({reason}) in phase {phase!r} after {done} of {total} units; its "
            f"state is saved in the private checkpoint {directory!r} and nothing was released. "
            "Continue it with the same fit arguments and resume=True.")


def _ocp():
    import orbax.checkpoint as ocp  # imported on use: fits without checkpoints never load orbax

    return ocp


def _canonical(value: Any) -> Any:
    """``value`` as JSON would give it back (tuples become lists, inf a string)."""
    def enc(v):
        if isinstance(v, float) and not math.isfinite(v):
            return repr(v)
        if isinstance(v, dict):
            return {str(k): enc(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [enc(x) for x in v]
        if isinstance(v, (np.integer, np.floating)):
            return enc(v.item())
        return v

    return json.loads(json.dumps(enc(value), sort_keys=True))


def fingerprint(identity: dict) -> str:
    """SHA-256 of the canonical JSON of a training's public identity (method, configuration...)."""
    return hashlib.sha256(json.dumps(_canonical(identity), sort_keys=True).encode()).hexdigest()


def data_fingerprint(x, key_data: np.ndarray) -> str:
    """HMAC-SHA-256 of the encoded rows (values, shape and order), keyed by the fit's secret key.

    The rows the mechanisms read are what must not change between runs. The key is stored in the
    same checkpoint, so the keying protects only a manifest separated from its checkpoint (copied
    into a bug report, say): anyone who can read the checkpoint directory has the key and can test
    a guessed table against the fingerprint (and, with the key, undo the training noise anyway).
    """
    arr = np.ascontiguousarray(np.asarray(x))
    mac = hmac.new(np.asarray(key_data).tobytes(), digestmod=hashlib.sha256)
    mac.update(f"{arr.dtype.str}{arr.shape}".encode())
    mac.update(arr.tobytes())
    return mac.hexdigest()


def _structure(tree: PyTree) -> tuple[list, Any, str]:
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    sig = (str(treedef), [(tuple(np.shape(a)), str(jax.numpy.result_type(a))) for a in leaves])
    return leaves, treedef, hashlib.sha256(repr(sig).encode()).hexdigest()


def _leaf_dict(leaves: list) -> dict[str, Any]:
    return {f"{i:06d}": leaf for i, leaf in enumerate(leaves)}


def _is_posix() -> bool:
    """Whether permission bits exist here (not on Windows, whose folders are protected by ACLs)."""
    return os.name == "posix"


def secure_tree(directory: pathlib.Path) -> int:
    """Removes the group and other permission bits of everything under ``directory``.

    Directories become 0700 and files keep only their owner bits (orbax's 0644 files become 0600);
    symbolic links are not followed. Entries removed while walking (an old checkpoint deleted by
    orbax) are skipped. Returns the number of entries changed. A no-op where permission bits do
    not exist (Windows).

    Raises:
        ValueError: an entry whose mode this process may not change (another user's file).
    """
    if not _is_posix():
        return 0
    changed = 0
    # top-down: a directory is made 0700 before the walk enters it
    for root, dirs, files in os.walk(directory):
        for name, is_dir in [(d, True) for d in dirs] + [(f, False) for f in files]:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            mode = stat.S_IMODE(st.st_mode)
            want = DIR_MODE if is_dir else mode & 0o700
            if stat.S_ISLNK(st.st_mode) or mode == want:
                continue
            try:
                os.chmod(path, want)
            except FileNotFoundError:
                continue
            except PermissionError as err:
                raise ValueError(
                    f"{path!r} in checkpoint_dir={str(directory)!r} is not private (directories "
                    f"0o700, files without group or other permissions): it has mode {oct(mode)} and "
                    f"this process cannot change it (it belongs to uid {st.st_uid}). Remove it, or "
                    f"run `chmod -R go-rwx {directory}` as its owner.") from err
            changed += 1
    return changed


def _secure_root(directory: pathlib.Path, created: bool) -> None:
    """Makes ``directory`` mode 0700 and removes group/other bits from everything in it.

    A directory created by this fit is set to 0700 silently. A pre-existing one whose mode lets
    group or others in is tightened with a ``UserWarning`` saying so (its contents with it); one
    whose mode this process may not change (another user's) is refused.

    Raises:
        ValueError: the mode cannot be changed, or the file system ignores permission bits.
    """
    if not _is_posix():
        return
    st = directory.stat()
    mode = stat.S_IMODE(st.st_mode)
    if mode != DIR_MODE:
        try:
            os.chmod(directory, DIR_MODE)
        except PermissionError as err:
            raise ValueError(
                f"checkpoint_dir={str(directory)!r} is not a private directory (mode 0o700: it "
                f"will hold the fit's secret key): its mode is {oct(mode)} and this process cannot "
                f"change it (the directory belongs to uid {st.st_uid}; this process runs as uid "
                f"{os.geteuid()}). Run `chmod 700 {directory}` as its owner, or pass a directory you "
                "own (fit creates a missing one with mode 0o700).") from err
        now = stat.S_IMODE(directory.stat().st_mode)
        if now & _OPEN_BITS:
            raise ValueError(
                f"checkpoint_dir={str(directory)!r} is not a private directory (mode 0o700): its "
                f"mode is still {oct(now)} after chmod 700: its file system ignores permission "
                "bits. Keep the checkpoint (it holds the fit's secret key) on a file system that "
                "enforces them.")
    contents = secure_tree(directory)
    if not created and mode & _OPEN_BITS:
        extra = (f", and group and other permissions were removed from {contents} entries in it"
                 if contents else "")
        warnings.warn(
            f"checkpoint_dir={str(directory)!r} was tightened from mode {oct(mode)} (open to group "
            f"or others) to mode 0o700{extra}: a checkpoint holds the fit's secret key "
            "(docs/checkpoints.md). Expected a private directory (`chmod 700 "
            f"{directory}`) or a missing one, which fit creates with mode 0o700.",
            UserWarning, stacklevel=4)


class _Phase:
    """The hook :func:`dpgen_jax.dpsgd.run_phase` calls for one phase (``restore``, ``save``)."""

    def __init__(self, owner: Checkpointer, name: str):
        self.owner, self.name = owner, name

    def restore(self, state: PyTree, total: int) -> tuple[PyTree, int]:
        return self.owner._restore(self.name, state, total)

    def save(self, state: PyTree, done: int, total: int, stopping: bool = False) -> None:
        self.owner._save(self.name, state, done, total, stopping)


class Checkpointer:
    """The checkpoints of one fit: created by :func:`open_checkpoint`, one hook per phase.

    Attributes:
        directory: the checkpoint directory.
        key_data: the fit key's raw words (secret).
        seeded: whether the key came from a user seed.
        resumed: the manifest of the checkpoint this fit continues, or None for a fresh fit.
    """

    def __init__(self, directory: pathlib.Path, manager, manifest: dict, key_data: np.ndarray,
                 every: int, resumed: dict | None, pause_reason: str):
        self.directory, self._manager, self._manifest = directory, manager, manifest
        self.key_data, self._every, self.resumed = key_data, every, resumed
        self._pause_reason = pause_reason
        self._states: dict[str, PyTree] = {}
        self._since: dict[str, int] = {}
        self._phases: dict[str, dict] = dict(resumed["phases"]) if resumed else {}
        latest = manager.latest_step()
        self._next_step = 0 if latest is None else latest + 1  # numbered by this fit, not by orbax

    @property
    def seeded(self) -> bool:
        return bool(self._manifest["identity"]["seeded"])

    def phase(self, name: str) -> _Phase:
        """The hook for phase ``name`` (pass it as ``checkpoint=`` to the phase runner)."""
        return _Phase(self, name)

    # -- restore ---------------------------------------------------------------------------------
    def _restore(self, name: str, state: PyTree, total: int) -> tuple[PyTree, int]:
        info = self._phases.get(name)
        leaves, treedef, structure = _structure(state)
        if info is None:
            self._states[name] = state
            return state, 0
        if info["structure"] != structure or info["total"] != int(total):
            raise ValueError(
                f"The checkpoint in {str(self.directory)!r} holds phase {name!r} with another "
                f"structure or schedule ({info['total']} units planned, {int(total)} now); it was "
                "written by a different version or configuration and cannot be continued.")
        ocp = _ocp()
        abstract = _leaf_dict([ocp.utils.to_shape_dtype_struct(x) for x in leaves])
        item = _item(name)
        restored = self._manager.restore(
            self.resumed["step"], args=ocp.args.Composite(**{item: ocp.args.StandardRestore(abstract)}))
        values = restored[item]
        state = jax.tree_util.tree_unflatten(treedef, [values[k] for k in sorted(values)])
        self._states[name] = state
        return state, int(info["done"])

    # -- save ------------------------------------------------------------------------------------
    def _save(self, name: str, state: PyTree, done: int, total: int, stopping: bool) -> None:
        self._states[name] = state
        self._since[name] = self._since.get(name, 0) + 1
        complete = done >= total
        if not (complete or stopping or self._since[name] >= self._every):
            return
        self._since[name] = 0
        self._phases[name] = {"done": int(done), "total": int(total), "complete": bool(complete),
                              "structure": _structure(state)[2]}
        self.write(current=name)
        if stopping:
            self._manager.wait_until_finished()
            raise FitPaused(str(self.directory), name, int(done), int(total), self._pause_reason)

    def write(self, current: str | None = None) -> int:
        """Saves the key, every phase's latest state and the manifest as the next checkpoint.

        The save is asynchronous. The previous save is waited for first (orbax would wait for it
        anyway), and the files it wrote are then made owner-only (:func:`secure_tree`).
        """
        ocp = _ocp()
        self._manager.wait_until_finished()
        secure_tree(self.directory)
        step, self._next_step = self._next_step, self._next_step + 1
        missing = sorted(set(self._phases) - set(self._states))
        if missing:  # a completed phase that this run has not restored: a bug in the caller
            raise RuntimeError(f"checkpoint: phases {missing} were not restored before a later save.")
        manifest = {**self._manifest, "step": step, "current_phase": current,
                    "phases": {k: self._phases[k] for k in self._phases}}
        items = {"manifest": ocp.args.JsonSave(manifest),
                 "key": ocp.args.StandardSave({"key": np.asarray(self.key_data)})}
        for k in self._phases:
            items[_item(k)] = ocp.args.StandardSave(_leaf_dict(jax.tree_util.tree_leaves(self._states[k])))
        self._manager.save(step, args=ocp.args.Composite(**items), force=True)
        return step

    def close(self) -> None:
        """Waits for the last checkpoint to be written, closes the manager and makes every file it
        wrote owner-only (:func:`secure_tree`)."""
        try:
            self._manager.wait_until_finished()
            self._manager.close()
        finally:
            secure_tree(self.directory)


def _item(name: str) -> str:
    return "phase." + name.replace("/", "_")


def _manager(directory: pathlib.Path):
    ocp = _ocp()
    # step and temporary directories are created 0700; the files are made owner-only after each save
    options = ocp.CheckpointManagerOptions(
        max_to_keep=MAX_TO_KEEP, create=True, enable_async_checkpointing=True,
        file_options=ocp.checkpoint_manager.FileOptions(path_permission_mode=DIR_MODE))
    return ocp.CheckpointManager(directory, options=options)


def _read_latest(manager, directory: pathlib.Path) -> tuple[dict, np.ndarray]:
    ocp = _ocp()
    step = manager.latest_step()
    restored = manager.restore(step, args=ocp.args.Composite(manifest=ocp.args.JsonRestore(),
                                                             key=ocp.args.StandardRestore()))
    manifest = dict(restored["manifest"])
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{str(directory)!r} does not hold a dpgen_jax checkpoint of format "
                         f"version {FORMAT_VERSION} (found {manifest.get('format')!r} "
                         f"{manifest.get('format_version')!r}).")
    return manifest, np.asarray(restored["key"]["key"])


def _differences(saved: dict, now: dict) -> list[str]:
    out = []
    for field in sorted(set(saved) | set(now)):
        a, b = saved.get(field), now.get(field)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            out.append(f"{field}: " + ", ".join(f"{k}={a.get(k)!r} in the checkpoint, {b.get(k)!r} now"
                                                for k in keys[:8]) + (" ..." if len(keys) > 8 else ""))
        else:
            out.append(f"{field}: {a!r} in the checkpoint, {b!r} now")
    return out


def open_for_fit(model, plan, x, *, checkpoint_dir, resume: bool, seed: int | None, every: int):
    """``(checkpointer or None, run key)`` of a fit: a fresh key without ``checkpoint_dir``; else the
    checkpoint directory opened for this fit's identity (method, target, N, schema, configuration,
    noise and planned steps; a resume checks every one against the saved run)."""
    _v.boolean(resume=resume)
    if checkpoint_dir is None:
        if resume:
            raise ValueError("resume=True needs checkpoint_dir=<the training's checkpoint directory>.")
        return None, dpsgd.make_key(seed)
    if not model.CHECKPOINTS:
        raise ValueError(
            f"{model.METHOD} does not take checkpoint_dir: it has no DP-SGD phase to resume "
            "(its mechanisms run in one pass; a fresh fit costs about what a resume would).")
    flat = privacy.flat_phases(plan.phases)
    identity = {
        "method": model.METHOD, "target_epsilon": plan.target_epsilon, "delta": plan.delta,
        "preset": plan.preset, "private": plan.private, "accountant": plan.accountant,
        # N only as it may be shown (privacy rule 10); the keyed fingerprint of the rows checks
        # the data on resume
        "num_records": plan.records.shown(plan.uses_records), "num_records_public": plan.records.public,
        "schema": plan.model_schema.to_dict(), "config": plan.config.to_dict(),
        "noise_multipliers": {p.name: p.noise_multiplier_or_none for p in flat},
        "planned_steps": {p.name: p.steps for p in flat}, "seeded": seed is not None}
    return open_checkpoint(checkpoint_dir, resume=resume, every=every, identity=identity, x=x,
                           seed=seed, pause_reason=f"the time budget max_seconds={plan.max_seconds} was spent")


def open_checkpoint(directory, *, resume: bool, every: int, identity: dict, x,
                    seed: int | None, pause_reason: str):
    """Opens the checkpoints of a fit; returns ``(checkpointer, run_key)``.

    A fresh fit (``resume=False``) needs a directory without checkpoints; it draws the key with
    ``dpsgd.make_key(seed)`` and writes checkpoint 0 (key and manifest, no phase yet) before training. A
    resume reads the latest checkpoint and refuses anything that is not the same training.

    The directory is made private before anything is written or read (POSIX): a missing one is
    created with mode 0700; an existing one whose mode lets group or others in is tightened to 0700
    with a ``UserWarning`` (refused if this process cannot change its mode); and every entry in it
    loses its group and other permission bits (a resume's 0644 files become 0600).

    Args:
        directory: the checkpoint directory (created with mode 0700 if missing).
        resume: continue the training saved in ``directory``.
        every: save every ``every`` chunks of a phase (and always at its end or on a pause).
        identity: the training's public identity (JSON-able): method, target, schema, N,
            resolved configuration, noise multipliers, ``seeded``.
        x: the encoded private rows (fingerprinted with the key).
        seed: the user's seed or None.
        pause_reason: the words a pause gives as its cause (e.g. the time budget).

    Raises:
        ValueError: a fresh fit into a directory with checkpoints, a resume without one, a
            resume whose data, method, configuration, target, schema or seed differ (the message
            lists every difference), or a directory that cannot be made private.
    """
    _v.whole(minimum=1, checkpoint_every=every)
    directory = pathlib.Path(directory).expanduser().resolve()
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"checkpoint_dir={str(directory)!r} is not a directory: pass a directory (fit "
                         "creates a missing one).")
    created = not directory.exists()
    directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)  # the mode is masked by the umask
    _secure_root(directory, created)
    manager = _manager(directory)
    try:
        has = manager.latest_step() is not None
        identity = _canonical(identity)
        if not resume:
            if has:
                raise ValueError(
                    f"checkpoint_dir={str(directory)!r} already holds checkpoints of a training. "
                    "Pass resume=True to continue that training, or delete the directory (it is "
                    "secret) or choose another one to start a new training.")
            run_key = dpsgd.make_key(seed)
            key_data = np.asarray(jax.random.key_data(run_key.key))
            resumed = None
        else:
            if not has:
                raise ValueError(f"resume=True but checkpoint_dir={str(directory)!r} holds no "
                                 "checkpoint; start the training without resume=True.")
            manifest, key_data = _read_latest(manager, directory)
            problems = _differences(manifest["identity"], identity)
            if manifest["identity"].get("seeded") and seed is not None:
                if not np.array_equal(np.asarray(jax.random.key_data(dpsgd.make_key(seed).key)), key_data):
                    problems.append("seed: the seed given differs from the checkpointed training's")
            elif manifest["identity"].get("seeded") and seed is None:
                problems.append("seed: the checkpointed training was seeded; pass the same seed")
            if not problems and manifest["data_fingerprint"] != data_fingerprint(x, key_data):
                problems.append("data: the encoded rows (values or order) differ from the "
                                "checkpointed training's (fingerprint mismatch)")
            if problems:
                raise ValueError(
                    f"Cannot resume the training in {str(directory)!r}: it is not the same "
                    "training. Steps already executed were calibrated and accounted for the "
                    "checkpoint's data, configuration and target; continuing with other ones "
                    "would compose two schedules (and could exceed the target epsilon). "
                    "Differences: " + "; ".join(problems) + ".")
            run_key = (dpsgd.make_key(seed) if seed is not None
                       else dpsgd.RunKey(jax.random.wrap_key_data(key_data), False))
            resumed = manifest
        manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "secret": SECRET_NOTE,
                    "identity": identity, "fingerprint": fingerprint(identity),
                    "data_fingerprint": data_fingerprint(x, key_data),
                    "runs": (resumed["runs"] + 1) if resumed else 1,
                    "versions": library_versions()}
        ckpt = Checkpointer(directory, manager, manifest, key_data, int(every), resumed, pause_reason)
        (directory / README).write_text(SECRET_NOTE + "\n")
        if resumed is None:
            ckpt.write(current=None)
        else:
            secure_tree(directory)
        return ckpt, run_key
    except BaseException:
        try:
            manager.close()
        finally:
            secure_tree(directory)
        raise


__all__ = ["Checkpointer", "FitPaused", "data_fingerprint", "fingerprint", "open_checkpoint",
           "secure_tree"]
