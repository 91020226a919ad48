"""Section ``kernels`` of posmix-bench-gpu: the correctness tests, compiled and run on the GPU.

1. ``tests/test_kernels.py`` in the GPU's process: every Triton kernel (rPosNet window, aPosNet,
   decoding step, gating) against the dense references, fp32, fp16 and bf16, outputs and gradients
   (its interpreter and ahead-of-time-compile children are CPU checks and are left out here).
2. The every-arch exactness suites for the rPosNet window and constant-state paths on the GPU
   (``POSMIX_TEST_DEVICE=cuda``: tests/conftest.py builds the models and batches there):
   incremental decoding == full forward with beam reordering, a sentence alone == in a padded batch,
   beam search alone == batched (``tests/test_decoding_exactness.py``, the rPosNet configurations),
   window == dense and the constant state == the full forward (``tests/test_search_window.py``; its
   interpreter child is a CPU check and is left out).

Needs a checkout (the tests/ folder) and pytest. In the CPU dry mode a few quick tests of each run on
the CPU, so that the commands cannot rot.
"""
import os
import re
import subprocess
import sys
import time

import posmix_fairseq

REPO = os.path.dirname(posmix_fairseq.USER_DIR)  # the checkout that holds the package and tests/
CPU_ONLY_CHILDREN = "not interpreter_child and not compile_for_gpu and not benchmark_runs_end_to_end"


def suites(mode, device):
    """(name, pytest arguments, extra environment) of the suites to run."""
    kernels = ["tests/test_kernels.py", "--noconftest", "-k", CPU_ONLY_CHILDREN]
    exact = ["tests/test_decoding_exactness.py", "tests/test_search_window.py", "-k",
             "(rposnet or window or constant_state) and not triton_kernels_forced"]
    env = {"POSMIX_TEST_DEVICE": device.type}
    if mode == "dry":
        kernels[-1] = "dense_references_equal or gating_reference"
        exact[-1] = "rposnet_window_small_k and incremental"
    return [("kernel tests (tests/test_kernels.py)", kernels, {}),
            ("rPosNet window / constant-state exactness (every-arch suites, rPosNet configs)", exact, env)]


def relative(text):
    """``text`` with the checkout's paths relative to it (the figures name no machine's folders)."""
    return text.replace(REPO + os.sep, "")


def parse_summary(text):
    counts = {}
    for number, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)", text):
        counts[word.rstrip("s") if word.startswith("error") else word] = int(number)
    return counts


def run(mode, device, log, timeout=540):
    if not os.path.isdir(os.path.join(REPO, "tests")):
        return dict(error=f"no tests/ folder beside the package ({REPO}): run from a checkout")
    results = []
    for name, args, extra in suites(mode, device):
        env = dict(os.environ, **extra)
        env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.pop("TRITON_INTERPRET", None)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", *args]
        start = time.perf_counter()
        try:
            proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
            output, code = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            output, code = (exc.stdout or "") + f"\ntimed out after {timeout} s", -1
            output = output.decode() if isinstance(output, bytes) else output
        lines = [line for line in output.strip().splitlines() if line.strip()]
        summary = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed)", line)), "")
        counts = parse_summary(summary)
        ok = code == 0 and counts.get("passed", 0) > 0 and not counts.get("failed") and not counts.get("error")
        failures = [line for line in lines if line.startswith(("FAILED", "ERROR"))][:20]
        results.append(dict(suite=name, command=" ".join(["python", *command[1:]]),
                            env=" ".join(f"{k}={v}" for k, v in extra.items()), ok=ok, summary=summary,
                            counts=counts, failures=failures, seconds=round(time.perf_counter() - start, 1),
                            tail=None if ok else relative("\n".join(lines[-40:]))))
        log(f"  {name}: {summary or 'no summary'} ({results[-1]['seconds']} s)")
    return dict(suites=results, targets=[dict(target=r["suite"], value=r["summary"], goal="all pass", met=r["ok"])
                                         for r in results])


def markdown(section):
    if "error" in section:
        return f"\nKernel tests: {section['error']}"
    lines = ["\nCorrectness on the device:\n", "| suite | result | time | command |", "|---|---|---|---|"]
    for r in section["suites"]:
        lines.append(f"| {r['suite']} | {'ok' if r['ok'] else 'FAILED'}: {r['summary']} | {r['seconds']} s | "
                     f"`{(r['env'] + ' ') if r['env'] else ''}{r['command']}` |")
        for f in r["failures"]:
            lines.append(f"|  | {f} | | |")
    return "\n".join(lines)
