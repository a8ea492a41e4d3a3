"""Name templates: inference, keys across runs, next-run names (iez.predict.names)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iez.fields import Matcher, Matchers
from iez.predict import workloads
from iez.predict.aipa import predict_next_run
from iez.predict.names import Template, advance, infer, next_label, split, width
from iez.request import Request


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


# -- run-time fields: names the job fills in when it runs ------------------------------------------

def created(runs):
    """(path, rank, job, host, renamed) per file, as aipa hands them to infer."""
    return [[(q.path, q.rank, q.run, q.host, bool(q.final_path)) for q in run] for run in runs]


def next_names(runs):
    model = infer(created(runs))
    last = len(runs) - 1
    return {model.next_path(model.key(last, q.path)) for q in runs[last]}


def req(path, run, rank=0, host="", final=""):
    return Request(path=path, write_bytes=1 << 20, rank=rank, run=run, host=host, final_path=final)


def test_job_id_and_host_become_fields():
    runs = [[req(f"/s/out.{job}.r{k}", str(job), k, host=f"nid{job % 7:05d}") for k in range(3)]
            + [req(f"/s/slurm-{job}.out", str(job)), req(f"/s/nid{job % 7:05d}.log", str(job), host=f"nid{job % 7:05d}")]
            for job in (1843301, 1843377, 1844012)]
    assert next_names(runs) == {"/s/out.{job}.r0", "/s/out.{job}.r1", "/s/out.{job}.r2", "/s/slurm-{job}.out",
                                "/s/{host}.log"}


def test_short_run_ids_and_parts_of_words_are_not_job_ids():
    """Runs numbered 1, 2, 3 are too short to tell from a name's own numbers; a job id inside a
    longer word or number is no part of its own."""
    runs = [[req(f"/s/ckpt{r}.h5", str(r)), req(f"/s/x12345{r}7/f", f"12345{r}")] for r in (1, 2, 3)]
    assert next_names(runs) == {"/s/ckpt4.h5", "/s/x1234547/f"}  # a counter, stepping 10


def test_host_full_and_short():
    runs = [[req(f"/s/{h}.cluster.org.err", "9001", host=f"{h}.cluster.org"), req(f"/s/{h}/o", "9001", host=f"{h}.cluster.org")]
            for h in ("c1", "c7")]
    assert next_names(runs) == {"/s/{fqdn}.err", "/s/{host}/o"}


def test_dates_and_times_that_change_become_fields():
    runs = [[req(f"/s/log.{d}.txt", "1"), req(f"/s/run-{iso}/out", "1"), req(f"/s/snap_{d}_{t}.h5", "1"),
             req(f"/s/t{t}.dat", "1"), req("/s/step.000100.h5", "1"), req(f"/s/at-{iso[11:]}", "1")]
            for d, iso, t in (("20261101", "2026-11-01T03:00:00", "030007"), ("20261103", "2026-11-03T22:41:09", "224109"),
                              ("20261124", "2026-11-24T01:15:55", "011555"))]
    assert next_names(runs) == {"/s/log.{date:%Y%m%d}.txt", "/s/run-{date:%Y-%m-%dT%H:%M:%S}/out",
                                "/s/snap_{date:%Y%m%d_%H%M%S}.h5", "/s/t{date:%H%M%S}.dat", "/s/step.000100.h5",
                                "/s/at-{date:%H:%M:%S}"}


def test_counters_are_not_dates():
    """An 8-digit rank (year 0000), a step counter that steps evenly, a stamp that never changed."""
    runs = [[req(f"/s/testFile.{k:08d}", "1", k) for k in range(2)] + [req(f"/s/plt{s:06d}", "1"),
            req("/s/in-2026-01-01.nc", "1")] for s in (100, 200, 300)]
    assert next_names(runs) == {"/s/testFile.00000000", "/s/testFile.00000001", "/s/plt000400", "/s/in-2026-01-01.nc"}


def test_mkstemp_suffixes_become_random_fields_and_one_file():
    """mkstemp's six characters, the mktemp command's ten: different in every file and run. A
    run's several temporaries under one template are one file of the next run."""
    suffixes = [["aB3xQz", "Zq81Lm"], ["k2JdP0", "0aZZ9q"], ["Qm4Tt1", "p9Lk2s"]]
    runs = [[req(f"/tmp/job/tmp.{s}{s[:4]}", "77" + str(r)) for s in sx] + [req(f"/s/ckpt.{s}", "7") for s in sx[:1]]
            for r, sx in enumerate(suffixes)]
    assert next_names(runs) == {"/tmp/job/tmp.{rand:10}", "/s/ckpt.{rand:6}"}


def test_a_constant_or_numeric_suffix_is_no_random_part():
    runs = [[req("/s/data.abcdef1", "1"), req(f"/s/out.{n}", "1")] for n in (100000, 100001)]
    assert next_names(runs) == {"/s/data.abcdef1", "/s/out.100002"}


def test_rsync_temporaries_renamed_in_one_run():
    """rsync writes .NAME.XXXXXX and renames it to NAME: a temporary from its first run."""
    run = [req("/dst/.data.bin.Xy12ab", "5", final="/dst/data.bin"), req("/dst/.a.txt.9QwErT", "5", final="/dst/a.txt"),
           req("/dst/keep.dat", "5")]
    assert next_names([run]) == {"/dst/.data.bin.{rand:6}", "/dst/.a.txt.{rand:6}", "/dst/keep.dat"}


def test_generated_parts_known_from_one_run():
    """The trace says the last N characters were generated (mkstemp, the mktemp command): a
    {rand:N} from one run, even of fewer than six or with no separator before it (sed -i's
    sedXXXXXX); a count that does not fit the name (not letters and digits, longer than a
    field) leaves it as it is."""
    runs = [[("/s/sedAb12Xy", 0, "5", "", False, 6), ("/s/job-ab1", 0, "5", "", False, 3),
             ("/s/out.x-yz", 0, "5", "", False, 3), ("/s/t." + "a" * 70, 0, "5", "", False, 70),
             ("/s/plain.Ab12Xy", 0, "5", "", False, 0)]]
    model = infer(runs)
    assert {model.next_path(model.key(0, c[0])) for c in runs[0]} == {
        "/s/sed{rand:6}", "/s/job-{rand:3}", "/s/out.x-yz", "/s/t." + "a" * 70, "/s/plain.Ab12Xy"}


def test_aipa_hands_the_generated_count_to_prediction():
    run = [Request(path="/s/tmp.aB3xQ9", write_bytes=1 << 20, run="5", name_random=6)]
    (q,) = predict_next_run([run]).requests
    assert q.path == "/s/tmp.{rand:6}"


def test_braces_in_names_are_escaped():
    assert next_names([[req("/s/{weird}.out", "1")]]) == {"/s/{{weird}}.out"}


def test_predicted_keys_match_the_next_runs_real_names():
    """The whole loop in Python: predict from three runs, write the plan keys, and match the
    fourth run's names as libiez would in its process (iez.fields.Matcher)."""
    def run(job, day, sfx):
        return [req(f"/s/out.{job}.{k}", str(job), k, host="cn3") for k in range(2)] + [
            req(f"/s/log.2026-11-{day:02d}", str(job)), req(f"/s/.res.{sfx}", str(job), final="/s/res")]
    runs = [run(1000 + 17 * i, 3 + i * 5, f"Ab{i}xY{i}") for i in range(3)]
    pred = predict_next_run(runs)
    keys = [q.path for q in pred.requests]
    assert sorted(keys) == ["/s/.res.{rand:6}", "/s/log.{date:%Y-%m-%d}", "/s/out.{job}.0", "/s/out.{job}.1"]
    match = Matcher(keys, {"job": "2001", "host": "cn9"})
    for q in run(2001, 28, "Qz9kL2"):
        assert match(q.path) is not None, q.path
    assert match("/s/out.2002.0") is None and match("/s/log.2026-11-32") is None


def test_matchers_share_a_matcher_among_processes_the_keys_cannot_tell_apart():
    """Many processes: the same key as a Matcher of each process's own fields, with one Matcher
    per value of the fields the keys name (literal keys: one for all)."""
    keys = ["/s/a.0", "/s/b.{rank}", "/s/c.{job}.{rand:4}", "/s/a.1"]
    many = Matchers(keys)
    procs = [{"rank": str(r), "job": j, "host": h} for r in range(4) for j in ("7", "8") for h in ("cn1", "cn2")]
    for env in procs:
        for name in ("/s/a.0", "/s/a.1", f"/s/b.{env['rank']}", "/s/b.9", f"/s/c.{env['job']}.Zz09", "/s/c.7.zz"):
            assert many(name, env) == Matcher(keys, env)(name), (name, env)
    assert len(many._by) == 4 * 2  # rank and job: the host named by no key makes no Matcher of its own
    literal = Matchers(["/s/a.0", "/s/a.1"])
    assert [literal(f"/s/a.{r % 2}", {"rank": str(r)}) for r in range(6)] == ["/s/a.0", "/s/a.1"] * 3
    assert len(literal._by) == 1
