"""libiez's CRC-32 (libiez/src/crc32.c: PCLMULQDQ where the CPU has it, tables elsewhere)
against zlib's, which the trace readers check every record and header with: every length up to
a few records', each split in two (a CRC continued from another), and the tables' way too."""

from __future__ import annotations

import random
import subprocess
import zlib

from conftest import BUILD, need_built

PROBE = BUILD / "libiez" / "iez-probe"


def test_crc32_is_zlibs() -> None:
    need_built(PROBE)
    rng = random.Random(21)
    cases = [(bytes(rng.randrange(256) for _ in range(n)), rng.randrange(n + 1)) for n in range(300)]
    cases += [(b"\xff" * 64, 13), (b"\x00" * 64, 7), (b"123456789", 4)]
    for data, split in cases:
        out = subprocess.run([str(PROBE), "crc", data.hex(), str(split)], capture_output=True, text=True,
                             timeout=10, check=True).stdout.split()
        assert [int(x) for x in out] == [zlib.crc32(data)] * 2, (data.hex(), split, out)
