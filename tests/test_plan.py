import pytest

from iez import plan as P
from iez.errors import ConfigError
from iez.layout import LUSTRE_EOF, Component, FileLayout, Layout

MiB = 1 << 20


def sample() -> P.Plan:
    p = P.Plan(meta={"app": "hacc", "run": "3"})
    p.add("/mnt/iez/a", Layout(stripe_size=100532224, osts=(8, 13, 12, 9, 7, 4, 3, 5)))
    p.add("/mnt/iez/b", Layout(stripe_size=MiB, stripe_count=4, stripe_offset=2, pool="fast"))
    p.add("/mnt/iez/c", FileLayout(components=(
        Component(0, 64 * MiB, Layout(stripe_size=MiB, stripe_count=1)),
        Component(64 * MiB, LUSTRE_EOF, Layout(stripe_size=4 * MiB, osts=(1, 5, 9, 13))))))
    p.add("/mnt/iez/d", Layout())
    return p


def test_roundtrip(tmp_path):
    p = sample()
    text = P.dumps(p)
    assert text.startswith("#iez-plan 1\n#app=hacc run=3\n")
    assert "/mnt/iez/a\tS=100532224,c=8,o=8:13:12:9:7:4:3:5\n" in text
    assert "/mnt/iez/c\t0-67108864/S=1048576,c=1;67108864-EOF/S=4194304,c=4,o=1:5:9:13\n" in text
    q = P.loads(text)
    assert q.entries == p.entries and q.meta == p.meta
    P.save(p, tmp_path / "plan")
    assert P.load(tmp_path / "plan").entries == p.entries


@pytest.mark.parametrize("text, msg", [
    ("", "not an iez plan"),
    ("#iez-plan 2\n", "version 2"),
    ("#iez-plan 1\nrelative\tc=1\n", "not absolute"),
    ("#iez-plan 1\n/a\n", ":2: expected PATH<TAB>LAYOUT"),
    ("#iez-plan 1\n/a\tc=1\n/a\tc=2\n", ":3: plan: /a is planned twice"),
    ("#iez-plan 1\n/a\tX=1\n", "bad layout field"),
    ("#iez-plan 1\n/a\tS=1000\n", "64 KiB"),
    ("#iez-plan 1\n/a\tc=1,c=2\n", "given twice"),
    ("#iez-plan 1\n/a\to=1:x\n", "bad number"),
    ("#iez-plan 1\n/a\t5-EOF/c=1\n", "start at offset 0"),
    ("#iez-plan 1\n/a\t0-x/c=1\n", "bad extent"),
])
def test_bad_plans(text, msg):
    with pytest.raises(ConfigError) as e:
        P.loads(text, source="p")
    assert msg in str(e.value)


def test_load_binary_garbage(tmp_path):
    f = tmp_path / "g"
    f.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="not an iez plan"):
        P.load(f)
