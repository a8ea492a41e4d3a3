"""Name templates: inference, keys across runs, next-run names (iez.predict.names)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iez.predict import workloads
from iez.predict.names import Template, advance, infer, next_label, split, width


def pairs(runs):
    return [[(q.path, q.rank) for q in run] for run in runs]


def test_split_and_render_round_trip():
    lits, digits = split("/lustre/hacc/FPP1-Part00000003-of-00000008.data")
    assert lits == ("/lustre/hacc/FPP", "-Part", "-of-", ".data")
    assert digits == ("1", "00000003", "00000008")
    t = Template(lits, (0, 8, 8))
    assert t.render([12, 3, 8]) == "/lustre/hacc/FPP12-Part00000003-of-00000008.data"
    assert str(t) == "/lustre/hacc/FPP%d-Part%08d-of-%08d.data"


def test_printf_form_escapes_percent_and_handles_no_fields():
    assert str(Template(("/a/100%_done",), ())) == "/a/100%%_done"
    assert Template(("/lustre/ior/testFile",), ()).render([]) == "/lustre/ior/testFile"


def test_width_from_leading_zeros():
    assert width(["00000003", "00000010"]) == 8
    assert width(["7", "12"]) == 0
    assert width(["0"]) == 0  # a lone zero is not padding
    assert width(["0042", "10000"]) == 4  # %04d overflowed by a big value
    assert Template(("s", ""), (4,)).render([10000]) == "s10000"


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=30))
def test_render_parses_back(values):
    t = Template(tuple(f"/p{chr(97 + i % 26)}" for i in range(len(values))) + ("",), tuple(4 for _ in values))
    lits, digits = split(t.render(values))
    assert lits == t.literals
    assert [int(d) for d in digits] == values


def test_advance_continues_periodic_steps():
    assert advance([5]) == 5
    assert advance([1, 2]) == 3  # one step is taken as a constant step
    assert advance([10, 40, 70]) == 100
    assert advance([8, 8, 8]) == 8
    assert advance([0, 1, 0, 1, 0]) == 1  # double-buffered A/B checkpoints
    assert advance([0, 1, 0, 1]) == 1  # a period must be seen twice in full to be believed
    assert advance([8, 8, 16, 16]) == 16
    assert advance([3, 17, 4, 90]) == 90  # no pattern: stay
    assert advance([5, 3]) == 1
    assert advance([3, 1]) == 1  # would go negative: stay


def test_ior_names_repeat_and_carry_the_rank():
    runs = workloads.ior(runs=3, nprocs=8)
    model = infer(pairs(runs))
    assert [str(t) for t in model.templates] == ["/lustre/scratch/ior/testFile.%08d"]
    for q in runs[-1]:
        key = model.key(2, q.path)
        assert model.next_path(key) == q.path
        assert model.rank_of(key) == q.rank


def test_hacc_names_advance_the_run_number_and_keep_part_of_n():
    runs = workloads.hacc_io(runs=4, nprocs=8)
    model = infer(pairs(runs[:-1]))
    assert [str(t) for t in model.templates] == ["/lustre/scratch/hacc-io/FPP%d-Part%08d-of-%08d.data"]
    predicted = {model.next_path(model.key(2, q.path)) for q in runs[2]}
    assert predicted == {q.path for q in runs[3]}
    assert "/lustre/scratch/hacc-io/FPP4-Part00000007-of-00000008.data" in predicted


def test_count_fields_follow_the_last_run():
    """of-N counts the ranks: 8 then 16 ranks is no step of 8 to go on with."""
    runs = workloads.hacc_io(runs=1, nprocs=8) + workloads.hacc_io(runs=1, nprocs=16)
    model = infer(pairs(runs))
    assert {model.next_path(model.key(1, q.path)).split("-of-")[1] for q in runs[1]} == {"00000016.data"}


def test_keys_line_up_the_same_file_across_runs():
    runs = workloads.hacc_io(runs=2, nprocs=4)
    model = infer(pairs(runs))
    by_rank = [{q.rank: model.key(r, q.path) for q in run} for r, run in enumerate(runs)]
    assert by_rank[0] == by_rank[1]
    assert len(set(by_rank[0].values())) == 4


def test_checkpoint_steps_continue_across_runs():
    runs = workloads.checkpoint(runs=3, nprocs=2, per_run=3, interval=10)
    model = infer(pairs(runs[:-1]))
    predicted = {model.next_path(model.key(1, q.path)) for q in runs[1]}
    assert predicted == {q.path for q in runs[2]}
    assert "/lustre/scratch/sim/ckpt_step0070_r1.h5" in predicted


def test_single_run_repeats_its_names():
    runs = workloads.checkpoint(runs=1, nprocs=2)
    model = infer(pairs(runs))
    assert {model.next_path(model.key(0, q.path)) for q in runs[0]} == {q.path for q in runs[0]}


def test_field_tied_to_rank_plus_offset():
    runs = [[(f"/o/node{k + 1}.out", k) for k in range(4)], [(f"/o/node{k + 1}.out", k) for k in range(4)]]
    model = infer(runs)
    key = model.key(1, "/o/node3.out")
    assert model.rank_of(key) == 2
    assert model.next_path(key) == "/o/node3.out"


def test_name_without_rank_field_has_no_rank():
    model = infer([[("/o/summary.txt", 0)], [("/o/summary.txt", 3)]])
    assert model.rank_of(model.key(1, "/o/summary.txt")) is None


def test_next_label():
    assert next_label(["1", "2", "3"]) == "4"
    assert next_label(["run-0009", "run-0010"]) == "run-0011"
    assert next_label(["7"]) == "7"
    assert next_label(["a", "b7"]) == ""
    assert next_label([]) == ""
    assert next_label(["", ""]) == ""
