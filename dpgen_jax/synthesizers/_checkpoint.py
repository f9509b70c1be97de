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
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import pathlib
from typing import Any

import jax
import numpy as np

from dpgen_jax import dpsgd
from dpgen_jax._versions import library_versions

PyTree = Any
FORMAT = "dpgen_jax.checkpoint"
FORMAT_VERSION = 1
MAX_TO_KEEP = 2
SECRET_NOTE = (
    "SECRET: this directory holds a training's secret key and network states trained on private "
    "rows, without any differential-privacy guarantee of their own. Never publish or share it; "
    "delete it (or keep it protected) once training has finished. The released model is the file "
    "written by save(), which holds none of this.")
README = "SECRET-README.txt"


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

    The rows the mechanisms read are what must not change between runs; keying the hash means the
    manifest alone (without the key beside it) does not let anyone test a guessed table against it.
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
        """Saves the key, every phase's latest state and the manifest as the next checkpoint."""
        ocp = _ocp()
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
        """Waits for the last checkpoint to be written and closes the manager."""
        self._manager.wait_until_finished()
        self._manager.close()


def _item(name: str) -> str:
    return "phase." + name.replace("/", "_")


def _manager(directory: pathlib.Path):
    ocp = _ocp()
    options = ocp.CheckpointManagerOptions(max_to_keep=MAX_TO_KEEP, create=True,
                                           enable_async_checkpointing=True)
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


def open_checkpoint(directory, *, resume: bool, every: int, identity: dict, x,
                    seed: int | None, pause_reason: str):
    """Opens the checkpoints of a fit; returns ``(checkpointer, run_key)``.

    A fresh fit (``resume=False``) needs a directory without checkpoints; it draws the key with
    ``dpsgd.make_key(seed)`` and writes checkpoint 0 (key and manifest, no phase yet) before training. A
    resume reads the latest checkpoint and refuses anything that is not the same training.

    Args:
        directory: the checkpoint directory (created with owner-only permissions if missing).
        resume: continue the training saved in ``directory``.
        every: save every ``every`` chunks of a phase (and always at its end or on a pause).
        identity: the training's public identity (JSON-able): method, target, schema, N,
            resolved configuration, noise multipliers, ``seeded``.
        x: the encoded private rows (fingerprinted with the key).
        seed: the user's seed or None.
        pause_reason: the words a pause gives as its cause (e.g. the time budget).

    Raises:
        ValueError: a fresh fit into a directory with checkpoints, a resume without one, or a
            resume whose data, method, configuration, target, schema or seed differ (the message
            lists every difference).
    """
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise ValueError(f"Expected checkpoint_every={every!r} to be a positive integer (chunks).")
    directory = pathlib.Path(directory).expanduser().resolve()
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"Expected checkpoint_dir={str(directory)!r} to be a directory.")
    fresh_dir = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    if fresh_dir:
        os.chmod(directory, 0o700)
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
        return ckpt, run_key
    except BaseException:
        manager.close()
        raise


__all__ = ["Checkpointer", "FitPaused", "data_fingerprint", "fingerprint", "open_checkpoint"]
