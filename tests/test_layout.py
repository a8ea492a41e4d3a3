import pytest

from iez.errors import LayoutError
from iez.layout import LUSTRE_EOF, Component, FileLayout, Layout
from iez.layout.raid0 import bytes_per_ost, bytes_per_stripe, ost_of_offset, stripe_of_offset
from iez.layout.stripe import method1, method2_stripe_size

MiB = 1 << 20


def test_seed000_worked_example_method2():
    # Table I -> Table II (docs/references.md#s000-table1, #s000-table2): 803,405,824 bytes, 8 stripes -> stripe size 100,532,224.
    s = method2_stripe_size(803_405_824, 8)
    assert s == 100_532_224
    assert s % (2 * 65536) == 0
    extra = s * 8 - 803_405_824
    assert extra == 851_968  # the paper's "833 KB (0.1%) bigger"
    assert abs(extra / 803_405_824 - 0.001) < 0.0001


def test_seed000_worked_example_method1():
    m = method1(803_405_824, 8)
    assert m.first % 131072 == 0 and m.last % 131072 == 0
    assert m.allocated >= 803_405_824
    assert m.allocated - 803_405_824 == 65_536  # the paper's "63 KB (0.008%)"
    assert m.per_stripe()[:-1] == [m.first] * 7 and m.last < m.first


def test_stripe_size_edges():
    assert method2_stripe_size(0, 4) == 131072
    assert method2_stripe_size(1, 1) == 131072
    with pytest.raises(LayoutError):
        method2_stripe_size(10, 0)
    with pytest.raises(LayoutError):
        method2_stripe_size(-1, 2)
    assert method1(10, 1).last == 131072


def test_raid0_offsets():
    lay = Layout(stripe_size=MiB, osts=(7, 2, 9))
    assert lay.stripe_count == 3
    assert stripe_of_offset(lay, 0) == 0
    assert stripe_of_offset(lay, MiB) == 1
    assert stripe_of_offset(lay, 3 * MiB + 5) == 0
    assert ost_of_offset(lay, 2 * MiB) == 9


@pytest.mark.parametrize("size", [0, 1, MiB - 1, MiB, 3 * MiB, 10 * MiB + 12345, 1000 * MiB + 7])
def test_bytes_per_stripe_matches_walk(size):
    fast = bytes_per_stripe(MiB, 4, 0, size)
    slow = [0] * 4
    for x in range(0, size, 4096):
        n = min(4096, size - x)
        slow[(x // MiB) % 4] += n
    assert fast == slow and sum(fast) == size


def test_bytes_per_stripe_partial_range():
    per = bytes_per_stripe(MiB, 2, MiB // 2, 5 * MiB + 10)
    assert sum(per) == 5 * MiB + 10 - MiB // 2
    # stripe 0 holds [0.5M,1M) [2M,3M) [4M,5M); stripe 1 holds [1M,2M) [3M,4M) [5M,5M+10)
    assert per == [MiB // 2 + MiB + MiB, MiB + MiB + 10]


def test_bytes_per_ost_pfl_uses_absolute_offsets():
    fl = FileLayout(components=(
        Component(0, 4 * MiB, Layout(stripe_size=MiB, osts=(0,))),
        Component(4 * MiB, LUSTRE_EOF, Layout(stripe_size=MiB, osts=(1, 2))),
    ))
    got = bytes_per_ost(fl, 9 * MiB)
    # [4M,9M): offsets 4M,6M,8M -> stripe 0 (OST1); 5M,7M -> stripe 1 (OST2)
    assert got == {0: 4 * MiB, 1: 3 * MiB, 2: 2 * MiB}
    assert ost_of_offset(fl, 5 * MiB) == 2


@pytest.mark.parametrize("kw", [
    dict(stripe_size=1000), dict(stripe_size=1 << 32), dict(stripe_count=2001),
    dict(stripe_count=-2), dict(pool="x" * 16), dict(osts=(1, 1)), dict(osts=(1, 2), stripe_count=3),
    dict(osts=(1, 2), stripe_offset=5), dict(stripe_offset=-5),
])
def test_bad_layouts(kw):
    with pytest.raises(LayoutError):
        Layout(**kw)


def test_bad_components():
    a = Layout(stripe_size=MiB, stripe_count=1)
    with pytest.raises(LayoutError, match="start at offset 0"):
        FileLayout(components=(Component(MiB, LUSTRE_EOF, a),))
    with pytest.raises(LayoutError, match="contiguous"):
        FileLayout(components=(Component(0, MiB, a), Component(2 * MiB, LUSTRE_EOF, a)))
    with pytest.raises(LayoutError, match="multiple of its stripe size"):
        FileLayout(components=(Component(0, 3 * MiB // 2, a), Component(3 * MiB // 2, LUSTRE_EOF, a)))
    with pytest.raises(LayoutError):
        FileLayout()
