"""write_tree: the emulated parameter files follow every change, whoever made it, while a value
that did not change is not written again."""

import os
import subprocess
import sys

from iez.emulated.paramtree import write_tree

F = "sys/fs/lustre/obdfilter/iez-OST0000/kbytesfree"


def test_unchanged_values_are_left_and_changed_ones_replaced(tmp_path):
    write_tree(tmp_path, {F: "100\n", "sys/fs/lustre/version": "2.15.5\n"})
    first = os.stat(tmp_path / F)
    write_tree(tmp_path, {F: "100\n", "sys/fs/lustre/version": "2.15.5\n"})
    assert os.stat(tmp_path / F).st_ino == first.st_ino  # not rewritten
    write_tree(tmp_path, {F: "99\n", "sys/fs/lustre/version": "2.15.5\n"})
    assert (tmp_path / F).read_text() == "99\n"
    assert os.stat(tmp_path / F).st_ino != first.st_ino  # a new file renamed over it: never half written
    assert sorted(p.name for p in (tmp_path / F).parent.iterdir()) == ["kbytesfree"]  # no temporary left


def test_files_changed_by_others_are_restored(tmp_path):
    write_tree(tmp_path, {F: "100\n"})
    with open(tmp_path / F, "r+") as f:  # in place, same size: only its times tell
        f.write("666\n")
    write_tree(tmp_path, {F: "100\n"})
    assert (tmp_path / F).read_text() == "100\n"
    os.unlink(tmp_path / F)
    write_tree(tmp_path, {F: "100\n"})
    assert (tmp_path / F).read_text() == "100\n"
    other = tmp_path / "other"
    other.write_text("200\n")
    os.replace(other, tmp_path / F)  # replaced by another file
    write_tree(tmp_path, {F: "100\n"})
    assert (tmp_path / F).read_text() == "100\n"
    for p in sorted(tmp_path.rglob("*"), reverse=True):  # the whole tree removed
        p.rmdir() if p.is_dir() else p.unlink()
    write_tree(tmp_path, {F: "100\n"})
    assert (tmp_path / F).read_text() == "100\n"


def test_a_fresh_process_compares_with_the_files(tmp_path):
    """A restarted MDS knows nothing of what was written: it reads each file once, leaves
    those that hold its value and rewrites the others."""
    write_tree(tmp_path, {F: "100\n", "a": "1\n"})
    before = os.stat(tmp_path / F).st_ino
    code = ("import sys; from pathlib import Path; from iez.emulated.paramtree import write_tree; "
            f"write_tree(Path(sys.argv[1]), {{{F!r}: '100\\n', 'a': '2\\n'}})")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    assert os.stat(tmp_path / F).st_ino == before
    assert (tmp_path / "a").read_text() == "2\n"
