"""The backend interface: which backend serves a path, and the lustre backend off Lustre."""

import os

import pytest

from iez.backend import backend_for
from iez.backend.lustre import (LL_IOC_LOV_SETSTRIPE, LL_SUPER_MAGIC, O_LOV_DELAY_CREATE,
                                LustreBackend, fs_type, is_lustre)
from iez.cluster import make_cluster
from iez.emulated.clusterdir import init_cluster_dir
from iez.errors import BackendError
from iez.layout import Layout


def test_lustre_constants_match_the_abi():
    # docs/references.md#l-abi-super-magic, #l-abi-setstripe
    assert LL_SUPER_MAGIC == 0x0BD00BD0
    assert LL_IOC_LOV_SETSTRIPE == 0x4008669A
    assert O_LOV_DELAY_CREATE & (os.O_NOCTTY | 0o20000) == os.O_NOCTTY | 0o20000  # the mask form


def test_lustre_backend_refuses_non_lustre(tmp_path):
    assert fs_type(tmp_path) != LL_SUPER_MAGIC
    assert fs_type(tmp_path / "not" / "yet") == fs_type(tmp_path)  # nearest existing ancestor
    assert not is_lustre(tmp_path)
    with pytest.raises(BackendError, match="is not a Lustre client mount"):
        LustreBackend(tmp_path)


def test_backend_for_picks_emulated_and_refuses_others(tmp_path):
    cd = init_cluster_dir(tmp_path / "c", make_cluster(1, 2, 1 << 30))
    b = backend_for(cd.fs / "deep" / "new-file")
    assert b.name == "emulated" and b.mount == cd.fs
    with pytest.raises(BackendError, match="neither Lustre nor an emulated"):
        backend_for(tmp_path / "elsewhere")
    with pytest.raises(BackendError, match="no layout"):
        (cd.fs / "plain").write_text("x")
        b.get_layout(cd.fs / "plain")
    with pytest.raises(BackendError, match="not running"):
        b.create(cd.fs / "needs-mds", Layout())
    assert not (cd.fs / "needs-mds").exists()  # nothing half-made is left behind
