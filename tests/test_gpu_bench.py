"""posmix-bench-gpu end to end in its CPU dry mode (tiny sizes), so that the GPU benchmark cannot rot:
every section runs (the kernel and exactness suites' commands, the sublayer table with its Triton
rows in the interpreter and FlexAttention's forward, fairseq-train children with their logs parsed,
decoding with forced lengths and the state sizes, the Multi30k recipe with posmix-freeze and
posmix-score), the results file resumes and merges. Its figures are no measurement. About 1-2
minutes on the 2-core machine (child processes importing fairseq are most of it)."""
import json
import os
import subprocess
import sys
import types

import pytest

from posmix_fairseq.harness.benchmarks import gpu
from posmix_fairseq.harness.command import UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MULTI30K = os.environ.get("POSMIX_MULTI30K", "")
HAVE_MULTI30K = os.path.isfile(os.path.join(MULTI30K, "train.en.gz"))


def test_dry_run_runs_every_section_and_resumes_and_merges(tmp_path, capsys):
    sections = "kernels,sublayer,train,decode" + (",quality" if HAVE_MULTI30K else "")
    results_path, markdown_path = tmp_path / "bench.json", tmp_path / "bench.md"
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    command = [sys.executable, "-m", "posmix_fairseq.harness.benchmarks.gpu", "--dry-run-cpu", "--sections", sections,
               "--json", str(results_path), "--markdown", str(markdown_path), "--work", str(tmp_path / "work"),
               "--set", "sublayer.force_triton=true"]
    if HAVE_MULTI30K:
        command += ["--multi30k", MULTI30K]
    result = subprocess.run(command, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    results = json.loads(results_path.read_text())
    assert results["meta"]["mode"] == "dry" and set(results["sections"]) == set(sections.split(","))
    got = results["sections"]

    assert all(s["ok"] for s in got["kernels"]["suites"]), got["kernels"]
    rows = {r["implementation"]: r for r in got["sublayer"]["rows"]}
    for name in ("rPosNet Triton window", "rPosNet PyTorch window", "rPosNet FlexAttention", "aPosNet Triton",
                 "aPosNet FlexAttention"):
        assert rows[name]["max_error"] <= 1e-5 and rows[name]["fwd_ms"] > 0, rows[name]
    assert rows["MHA SDPA flash"]["fwd_bwd_ms"] > 0 and "no backward" in rows["rPosNet FlexAttention"]["fwd_bwd_error"]

    train = {r["system"]: r for r in got["train"]["rows"]}
    assert all(r["wps"] > 0 and len(r["losses"]) == 3 for r in train.values()), train
    assert [t["met"] for t in got["train"]["targets"]] == [True]  # dense == window loss curves (fp32)

    decode = got["decode"]
    assert {r["model"] for r in decode["rows"]} == {"Transformer", "rPosNet", "rPosNet frozen",
                                                     "rPosNet frozen, Triton decoding step"}
    assert len({(r["output"], r["beam"], r["batch"], r["tokens"]) for r in decode["rows"]}) == 4  # same tokens
    # the decoding step each rPosNet model takes on CUDA tensors, as built (the default, or the one set for it)
    cuda_choice = {n: line.split("cuda: ", 1)[1] for n, line in decode["kernels"].items() if "cuda: " in line}
    assert "decode table" in cuda_choice["rPosNet frozen"], decode["kernels"]
    assert "decode triton" in cuda_choice["rPosNet frozen, Triton decoding step"], decode["kernels"]
    assert decode["state_bytes"]["rPosNet frozen"] < decode["state_bytes"]["Transformer"]

    if HAVE_MULTI30K:
        quality = {r["system"]: r for r in got["quality"]["rows"]}
        assert quality["rPosNet frozen"]["differing_hypotheses"] == 0
        assert quality["rPosNet"]["BLEU"] >= 0 and quality["rPosNet"]["valid_curve"]

    text = markdown_path.read_text()
    assert text.startswith("# posmix-bench-gpu: CPU") and "not a measurement" in text and "## decode" in text

    # a second run with the same results file skips what it holds; --merge joins files
    gpu.main(["--dry-run-cpu", "--sections", "sublayer", "--json", str(results_path), "--work", str(tmp_path)])
    assert "[sublayer] already in" in capsys.readouterr().out
    partial = tmp_path / "decode.json"
    partial.write_text(json.dumps(dict(meta=results["meta"], sections={"decode": got["decode"]})))
    merged = gpu.run(["--merge", str(results_path), str(partial), "--json", str(tmp_path / "all.json")])
    assert set(merged["sections"]) == set(sections.split(","))


def test_bad_section_and_setting_are_clear_errors():
    with pytest.raises(UsageError, match="--sections: speed unknown; valid: kernels, sublayer, train, decode, quality"):
        gpu.main(["--dry-run-cpu", "--sections", "speed"])
    with pytest.raises(UsageError, match="--set 'dims=1': write SECTION.KEY=VALUE"):
        gpu.main(["--dry-run-cpu", "--sections", "sublayer", "--set", "dims=1"])


def test_merge_joins_the_rows_of_one_section_from_several_runs(tmp_path):
    """Sections run in separate calls (D = 512 and D = 1024; one quality system a call) join."""
    meta = dict(name="GPU", torch="t", triton="x", cuda="c", python="3.12", date="d", mode="full")

    def sublayer_rows(dim):
        return [dict(D=dim, H=dim // 64, K=16, N=n, batch=16384 // n, implementation=impl, family="rposnet",
                     fwd_ms=1.0, fwd_bwd_ms=ms * n / 64) for n in (64, 256, 1024) for impl, ms in
                (("rPosNet Triton window", 1.0), ("MHA SDPA flash", 1.5), ("rPosNet PyTorch window", 4.0),
                 ("rPosNet FlexAttention", 2.0))]
    files = []
    for i, (dim, system, bleu) in enumerate(((512, "Transformer", 30.0), (1024, "rPosNet", 30.2))):
        section = dict(config=dict(tokens=16384, dims=[dim]), rows=sublayer_rows(dim), targets=[])
        quality = dict(config=dict(beam=5), rows=[dict(system=system, BLEU=bleu)], targets=[])
        path = tmp_path / f"{i}.json"
        path.write_text(json.dumps(dict(meta=meta, sections=dict(sublayer=section, quality=quality))))
        files.append(str(path))
    merged = gpu.run(["--merge", *files, "--json", str(tmp_path / "all.json")])
    sub = merged["sections"]["sublayer"]
    assert sub["config"]["dims"] == [512, 1024] and len(sub["rows"]) == 24
    assert [t["met"] for t in sub["targets"] if "SDPA" in t["target"]] == [True, True]
    assert [t["met"] for t in sub["targets"] if "flat" in t["target"] or "per token" in t["target"]] == [False, False]
    bleu = [t for t in merged["sections"]["quality"]["targets"] if "BLEU" in t["target"]]
    assert len(bleu) == 1 and abs(bleu[0]["value"] - 0.2) < 1e-9 and bleu[0]["met"]


def test_a_competitor_without_a_figure_leaves_its_target_open_and_says_why():
    """FlexAttention's backward failing to compile (torch 2.11 on an H200) gives its target no value and no
    verdict, with the error in the table, never a NaN; the other targets use the lengths that were timed."""
    from posmix_fairseq.harness.benchmarks.gpu import section_markdown, sublayer

    error = "InductorError: LoweringException: AssertionError: joint_subgraph_buffer is None - this is a bug!"
    rows = []
    for n, triton_ms in ((64, 4.0), (256, 4.0)):
        rows += [dict(D=512, N=n, implementation="rPosNet Triton window", family="rposnet", fwd_bwd_ms=triton_ms),
                 dict(D=512, N=n, implementation="MHA SDPA flash", family="mha", fwd_bwd_ms=2.0),
                 dict(D=512, N=n, implementation="rPosNet FlexAttention", family="rposnet", fwd_bwd_error=error)]
    rows.append(dict(D=512, N=64, implementation="rPosNet PyTorch window", family="rposnet", fwd_bwd_ms=14.0))
    for r in rows:
        r.update(H=8, K=16, batch=16384 // r["N"], fwd_ms=1.0)
    got = {t["target"].split(": ", 1)[1]: t for t in sublayer.targets(rows)}
    flex = got["Triton window vs FlexAttention (same function), fwd+bwd (min over N)"]
    assert flex["value"] is None and flex["met"] is None and error in flex["note"] and "N = 64, 256" in flex["note"]
    sdpa = got["Triton window rPosNet fwd+bwd vs SDPA-flash MHA at N <= 256 (min)"]
    assert sdpa["value"] == 0.5 and sdpa["met"] is False
    window = got["Triton window vs PyTorch window form, fwd+bwd (min over N)"]  # timed at N = 64 only
    assert window["value"] == 3.5 and window["met"] is True and "N = 256: no row" in window["note"]
    meta = dict(mode="full", name="GPU")
    text = section_markdown("sublayer", dict(rows=rows, targets=list(got.values()), meta=meta,
                                             config=dict(dims=[512], tokens=16384, heads=8, k=16)))
    assert f"| no figure (rPosNet FlexAttention has no fwd+bwd figure at N = 64, 256: {error}) | > 1x | - |" in text
    assert "nan" not in text


def test_the_decoding_rows_choose_the_rposnet_decoding_step():
    """rposnet_decode is chosen by frozen rPosNet's batched tokens/s with each value at the shortest output
    (the slowest beam), not by a longer output where the other value wins."""
    from posmix_fairseq.harness.benchmarks.gpu.defaults import suggestions

    speeds = {(30, 5): (800, 900), (30, 12): (700, 650), (512, 5): (500, 400), (512, 12): (450, 300)}
    rows = [dict(output=out, beam=beam, batch=batch, model=model, tokens_per_s=tps * batch / 64)
            for (out, beam), pair in speeds.items() for batch in (1, 64)
            for model, tps in zip(("rPosNet frozen", "rPosNet frozen, Triton decoding step"), pair)]
    meta = dict(mode="full")
    text = suggestions(dict(meta=meta, sections=dict(decode=dict(rows=rows))))
    assert ("| rposnet_decode | table | (search only) | **table** (output 30, batch 64, slowest beam: "
            "table 700 tokens/s, triton 650 tokens/s) |") in text, text
    faster = [dict(r, tokens_per_s=r["tokens_per_s"] * 2) if "Triton" in r["model"] else r for r in rows]
    assert "**triton** (output 30, batch 64, slowest beam: triton 1,300 tokens/s, table 700" in suggestions(
        dict(meta=meta, sections=dict(decode=dict(rows=faster))))
    assert suggestions(dict(meta=meta, sections=dict(decode=dict(rows=[r for r in rows if r["batch"] == 1])))) \
        .count("rposnet_decode") == 0  # unbatched rows choose nothing


def test_a_failed_suite_keeps_its_output_tail_without_the_checkout_path(monkeypatch):
    """The kernels section keeps a failed suite's last lines for the figures file, with the checkout's paths
    made relative (the figures are committed and name no machine's folders)."""
    from posmix_fairseq.harness.benchmarks.gpu import kernel_tests

    output = (f"{kernel_tests.REPO}{os.sep}tests{os.sep}test_kernels.py:12: AssertionError\n"
              "FAILED tests/test_kernels.py::test_x - AssertionError\n1 failed, 3 passed in 1.0s\n")
    monkeypatch.setattr(kernel_tests.subprocess, "run",
                        lambda command, **kw: subprocess.CompletedProcess(command, 1, output, ""))
    suites = kernel_tests.run("dry", types.SimpleNamespace(type="cpu"), log=lambda message: None)["suites"]
    assert [s["ok"] for s in suites] == [False, False] and suites[0]["counts"] == dict(failed=1, passed=3)
    assert suites[0]["failures"] == ["FAILED tests/test_kernels.py::test_x - AssertionError"]
    assert f"tests{os.sep}test_kernels.py:12: AssertionError" in suites[0]["tail"]
    assert kernel_tests.REPO not in suites[0]["tail"]


def test_a_section_that_failed_runs_again_and_the_exit_status_says_whether_all_ran(tmp_path, monkeypatch):
    """The results file of an earlier run holds ``sublayer`` as run and ``decode`` as failed: the next
    run skips the first, runs the second again, and exits 0 once it ran; a section failing now exits 1.
    The sections themselves are replaced by a recorder (what they measure is the dry run's test)."""
    results_path = tmp_path / "bench.json"
    meta = dict(name="GPU", torch="t", triton="x", cuda="c", python="3.12", date="d", mode="dry")
    results_path.write_text(json.dumps(dict(meta=meta, sections=dict(
        sublayer=dict(rows=[], targets=[], config=dict(dims=[])), decode=dict(error="RuntimeError: boom", targets=[])))))
    ran, fail = [], set()

    def fake_section(name, *args):
        ran.append(name)
        if name in fail:
            raise RuntimeError(f"{name} broke")
        return dict(rows=[], targets=[], state_bytes={}, config={})

    monkeypatch.setattr(gpu, "run_section", fake_section)
    monkeypatch.setattr(gpu, "section_markdown", lambda name, section: "")
    monkeypatch.setattr(gpu, "markdown", lambda results: "")
    argv = ["--dry-run-cpu", "--sections", "sublayer,decode", "--json", str(results_path), "--work", str(tmp_path)]
    assert gpu.main(argv) == 0 and ran == ["decode"]
    assert "error" not in json.loads(results_path.read_text())["sections"]["decode"]
    fail.add("decode")
    assert gpu.main(argv + ["--redo"]) == 1 and ran == ["decode", "sublayer", "decode"]


def test_the_console_command_exits_0_after_all_sections_ran(tmp_path):
    """What the ``posmix-bench-gpu`` console script runs, ``sys.exit(main())``, exits 0 after a merge and
    prints no results dict after the tables."""
    meta = dict(name="GPU", torch="t", triton="x", cuda="c", python="3.12", date="d", mode="full")
    path = tmp_path / "a.json"
    path.write_text(json.dumps(dict(meta=meta, sections={})))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    console_script = "import sys; from posmix_fairseq.harness.benchmarks.gpu import main; sys.exit(main())"
    result = subprocess.run([sys.executable, "-c", console_script, "--merge", str(path)],
                            cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "'sections'" not in result.stdout and "'meta'" not in result.stdout


def test_each_timed_gpu_run_starts_with_the_l2_cache_flushed(monkeypatch):
    """posmix-bench-kernels' timer zeroes a buffer larger than the L2 cache before each timed run, outside the
    timed span (triton.testing.do_bench's flush), so no run reads what its previous run left in the cache."""
    import torch

    from posmix_fairseq.harness.benchmarks import kernels

    log = []

    class Buffer:
        def zero_(self):
            log.append("flush")

    class Event:
        def __init__(self, enable_timing):
            pass

        def record(self):
            log.append("record")

        def elapsed_time(self, end):
            return 1.0

    sizes = []
    monkeypatch.setattr(torch, "empty", lambda size, **kw: sizes.append(size * 4) or Buffer())
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    assert kernels.timed(lambda: log.append("run"), types.SimpleNamespace(type="cuda"), repeats=3, warmup=1) == 1.0
    assert log == ["run"] + ["flush", "record", "run", "record"] * 3
    assert sizes == [kernels.L2_FLUSH_BYTES] and kernels.L2_FLUSH_BYTES >= 256 * 2 ** 20  # an H100's L2: 50 MB
