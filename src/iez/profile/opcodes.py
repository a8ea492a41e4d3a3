"""Lustre RPC opcodes (lustre_idl.h, docs/references.md#l-fmt-opcodes) and the classes LIOPProf counts.

Classes: read, write, punch (truncate), lock enqueue, lock cancel, lock callback, metadata,
ping, other. Data I/O runs on `ll_ost_io` threads, extent locks on `ll_ost`, cancels on
`ldlm_cn`.
"""

from __future__ import annotations

import numpy as np

OST_GETATTR, OST_SETATTR, OST_READ, OST_WRITE, OST_CREATE, OST_DESTROY = 1, 2, 3, 4, 5, 6
OST_PUNCH, OST_STATFS, OST_SYNC = 10, 13, 16
LDLM_ENQUEUE, LDLM_CONVERT, LDLM_CANCEL = 101, 102, 103
LDLM_BL_CALLBACK, LDLM_CP_CALLBACK, LDLM_GL_CALLBACK = 104, 105, 106
OBD_PING = 400

NAMES = {
    0: "ost_reply", 1: "ost_getattr", 2: "ost_setattr", 3: "ost_read", 4: "ost_write", 5: "ost_create",
    6: "ost_destroy", 7: "ost_get_info", 8: "ost_connect", 9: "ost_disconnect", 10: "ost_punch", 13: "ost_statfs",
    16: "ost_sync", 17: "ost_set_info", 19: "ost_quotactl", 21: "ost_ladvise", 22: "ost_fallocate", 23: "ost_seek",
    33: "mds_getattr", 34: "mds_getattr_lock", 35: "mds_close", 36: "mds_reint", 37: "mds_readpage",
    38: "mds_connect", 39: "mds_disconnect", 41: "mds_statfs", 44: "mds_sync", 49: "mds_getxattr",
    101: "ldlm_enqueue", 102: "ldlm_convert", 103: "ldlm_cancel", 104: "ldlm_bl_callback", 105: "ldlm_cp_callback",
    106: "ldlm_gl_callback", 400: "obd_ping", 1000: "out_update",
}

CLASSES = ("read", "write", "punch", "lock enqueue", "lock cancel", "lock callback", "metadata", "ping", "other")
READ, WRITE, PUNCH, ENQUEUE, CANCEL, CALLBACK, METADATA, PING, OTHER = range(len(CLASSES))
DATA_CLASSES = (READ, WRITE)

_METADATA = {OST_GETATTR, OST_SETATTR, OST_CREATE, OST_DESTROY, 7, 8, 9, OST_STATFS, 17, 19} | set(range(33, 65))
_TABLE = np.full(1101, OTHER, dtype=np.int8)
for _opc in _METADATA:
    _TABLE[_opc] = METADATA
_TABLE[[OST_READ, OST_WRITE, OST_PUNCH, LDLM_ENQUEUE, LDLM_CONVERT, LDLM_CANCEL, OBD_PING]] = [
    READ, WRITE, PUNCH, ENQUEUE, ENQUEUE, CANCEL, PING]
_TABLE[[LDLM_BL_CALLBACK, LDLM_CP_CALLBACK, LDLM_GL_CALLBACK]] = CALLBACK


def name(opc: int) -> str:
    return NAMES.get(opc, f"opc {opc}")


def classify(opc: np.ndarray) -> np.ndarray:
    """The class index of every opcode (vectorised; unknown or out-of-range opcodes: other)."""
    opc = np.asarray(opc)
    ok = (opc >= 0) & (opc < len(_TABLE))
    return np.where(ok, _TABLE[np.clip(opc, 0, len(_TABLE) - 1)], OTHER).astype(np.int8)
