"""Checkpoint permissions (docs/checkpoints.md, "Who can read the directory"): the checkpoint
directory of a resumable fit is mode 0700 and nothing in it can be read by group or others.

Oracle: the mode of every file and directory under the checkpoint directory after a real,
checkpointed fit (``os.walk`` + ``lstat``): directories 0o700, files 0o600 (orbax writes 0644 files
under the default umask, so these checks fail without the library's own tightening). The tests
run as any user, root included: root is not exempt from mode bits being set and read back.
"""

from __future__ import annotations

import os
import pathlib
import stat
import warnings

import pytest

from dpgen_jax import synthesizers
from dpgen_jax.synthesizers import _checkpoint
from tests import _tables
from tests.test_checkpoint import EPS, GAN_TINY

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _not_private(directory: pathlib.Path) -> list[str]:
    """Every entry under ``directory`` (itself included) that is not a 0o700 directory or a 0o600
    file, as ``"path 0o..."``; asserts that the tree holds a written checkpoint (so the check is
    not vacuous)."""
    bad, files = [], 0
    if _mode(directory) != 0o700:
        bad.append(f"{directory} {oct(_mode(directory))}")
    for root, dirs, names in os.walk(directory):
        for name in dirs:
            if _mode(os.path.join(root, name)) != 0o700:
                bad.append(f"{os.path.join(root, name)} {oct(_mode(os.path.join(root, name)))}")
        for name in names:
            files += 1
            if _mode(os.path.join(root, name)) != 0o600:
                bad.append(f"{os.path.join(root, name)} {oct(_mode(os.path.join(root, name)))}")
    assert files >= 10 and (directory / _checkpoint.README).is_file()
    assert any(p.name.isdigit() and (p / "key").is_dir() for p in directory.iterdir())
    return bad


def _open_up(directory: pathlib.Path, *, root: bool) -> None:
    """Gives every file mode 0o644 and every directory under ``directory`` mode 0o755 (and
    ``directory`` itself too if ``root``), as ``chmod -R a+rX`` or a copy that keeps no modes
    would."""
    for base, dirs, names in os.walk(directory):
        for name in dirs:
            os.chmod(os.path.join(base, name), 0o755)
        for name in names:
            os.chmod(os.path.join(base, name), 0o644)
    if root:
        os.chmod(directory, 0o755)


def _fit(directory, **kwargs):
    model = synthesizers.create("dp-auto-gan", **GAN_TINY)
    return model.fit(_tables.mixed_frame(300, 0), _tables.MIXED_SCHEMA, epsilon=EPS, seed=0,
                     checkpoint_dir=directory, checkpoint_every=1, **kwargs)


def _tightening_warnings(record) -> list[str]:
    return [str(w.message) for w in record if "tightened" in str(w.message)]


def test_a_directory_created_by_fit_is_private_with_everything_in_it(tmp_path):
    directory = tmp_path / "runs" / "ckpt"  # parents created too
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        _fit(directory)
    assert _tightening_warnings(record) == []
    assert _not_private(directory) == []


@pytest.mark.parametrize("mode", [0o755, 0o777], ids=oct)
def test_a_directory_made_beforehand_is_tightened_with_a_warning(tmp_path, mode):
    directory = tmp_path / "ckpt"
    directory.mkdir()
    os.chmod(directory, mode)  # `mkdir -p` under the usual umask; or world-writable
    with pytest.warns(UserWarning, match=rf"checkpoint_dir=.*ckpt' was tightened from mode "
                                         rf"{oct(mode)} .* to mode 0o700"):
        _fit(directory)
    assert _not_private(directory) == []


@pytest.mark.slow  # a paused fit and its resume; the directory rules run by default in the other tests
def test_a_resume_tightens_the_files_and_the_directory(tmp_path):
    directory = tmp_path / "ckpt"
    with pytest.raises(synthesizers.FitPaused):  # pauses after the first autoencoder chunk
        _fit(directory, max_seconds=0)
    assert _not_private(directory) == []  # a pause leaves the saved state private
    # files 0644 in a private directory: tightened silently (nobody else could enter it)
    _open_up(directory, root=False)
    assert _mode(directory) == 0o700 and _mode(directory / _checkpoint.README) == 0o644
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(synthesizers.FitPaused):  # pauses after the first GAN iteration
            _fit(directory, resume=True, max_seconds=0)
    assert _tightening_warnings(record) == []
    assert _not_private(directory) == []
    # the directory open too (`chmod -R a+rX`, say): tightened with a warning
    _open_up(directory, root=True)
    with pytest.warns(UserWarning, match=r"tightened from mode 0o755 .* to mode 0o700, and group "
                                         r"and other permissions were removed from \d+ entries"):
        model = _fit(directory, resume=True)
    assert model.privacy_report()["epsilon"] <= EPS
    assert _not_private(directory) == []


def test_a_directory_that_cannot_be_made_private_is_refused(tmp_path, monkeypatch):
    directory = tmp_path / "ckpt"
    directory.mkdir()
    os.chmod(directory, 0o755)

    def refuse(path, mode, **kwargs):
        raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr(os, "chmod", refuse)  # as for a directory another user owns
    with pytest.raises(ValueError, match=r"checkpoint_dir=.*ckpt' is not a private "
                                         r"directory \(mode 0o700.*its mode is 0o755.*"
                                         r"`chmod 700 .*ckpt`"):
        _fit(directory)
    # a file system without permission bits: chmod succeeds and changes nothing
    monkeypatch.setattr(os, "chmod", lambda path, mode, **kwargs: None)
    with pytest.raises(ValueError, match=r"mode is still 0o755 after chmod 700: its file system "
                                         "ignores permission bits"):
        _fit(directory)
    monkeypatch.undo()
    assert list(directory.iterdir()) == []  # nothing was written into it


def test_secure_tree_removes_group_and_other_bits_and_follows_no_link(tmp_path):
    inside, outside = tmp_path / "ckpt", tmp_path / "outside.txt"
    (inside / "a" / "b").mkdir(parents=True)
    for path, mode in [(inside / "a", 0o755), (inside / "a" / "b", 0o777)]:
        os.chmod(path, mode)
    (inside / "a" / "b" / "f").write_text("x")
    os.chmod(inside / "a" / "b" / "f", 0o664)
    (inside / "run.sh").write_text("x")
    os.chmod(inside / "run.sh", 0o755)
    outside.write_text("x")
    os.chmod(outside, 0o644)
    (inside / "link").symlink_to(outside)
    assert _checkpoint.secure_tree(inside) == 4
    assert [_mode(inside / "a"), _mode(inside / "a" / "b")] == [0o700, 0o700]
    assert [_mode(inside / "a" / "b" / "f"), _mode(inside / "run.sh")] == [0o600, 0o700]
    assert _mode(outside) == 0o644  # the link's target is not the checkpoint's
    assert _checkpoint.secure_tree(inside) == 0
