"""The fingerprint of a study system's model code (posmix_fairseq/harness/evaluation/claims/fingerprint.py): the
same on two calls, changed by a change to the model's outputs; and the runner's check (``check_fingerprint``),
which refuses a run whose fingerprint differs from the system's other runs, accepts one within the tolerance
and exempts runs that recorded none. The refusal through posmix-claims itself: tests/test_claims.py."""
import json
import re
from argparse import Namespace

import pytest

from posmix_fairseq.harness.evaluation.claims import runner
from posmix_fairseq.harness.evaluation.claims.data import Layout
from posmix_fairseq.harness.evaluation.claims.fingerprint import TOLERANCE, fingerprint, same_code, system_flags
from posmix_fairseq.mixers.engine import energy


def test_the_fingerprint_is_the_same_on_two_calls():
    first, second = (fingerprint(system_flags("shaw")) for _ in range(2))
    assert first == second
    assert re.fullmatch(r"[0-9a-f]{16}", first["fingerprint"]) and len(first["fingerprint_outputs"]) == 36
    assert fingerprint(system_flags("transformer"))["fingerprint"] != first["fingerprint"]  # another model


@pytest.mark.parametrize("scale", [1.1, 1.0005])
def test_a_change_to_the_models_outputs_changes_it(monkeypatch, scale):
    """Sharper attention weights in every softmax mixer (a model code change): a large change changes the hash,
    and a small one, below the hash's rounding, still the values the check compares."""
    before = fingerprint(system_flags("shaw"))
    softmax = energy.masked_softmax
    monkeypatch.setattr(energy, "masked_softmax", lambda logits, excluded: softmax(logits * scale, excluded))
    after = fingerprint(system_flags("shaw"))
    assert not same_code(after, before)
    if scale > 1.01:
        assert after["fingerprint"] != before["fingerprint"]


def record(code, **changes):
    return {**code, "commit": "c0ffee", **changes}


def test_the_runner_refuses_a_seed_of_other_model_code(tmp_path):
    code = {"fingerprint": "00112233aabbccdd", "fingerprint_outputs": [-3.5] * 36}
    opts, lay = Namespace(results=str(tmp_path / "results")), Layout(str(tmp_path / "study"))

    def keep(seed, rec, folder="results"):
        path = (tmp_path / "results" / "shaw" / f"seed{seed}" if folder == "results" else
                tmp_path / "study" / "systems" / "shaw" / f"seed{seed}")
        path.mkdir(parents=True, exist_ok=True)
        (path / ("result.json" if folder == "results" else "train.json")).write_text(json.dumps(rec))

    keep(1, {"commit": "old"})  # no fingerprint: exempt
    keep(2, record(code))  # the same code
    near = [v + TOLERANCE / 2 for v in code["fingerprint_outputs"]]
    keep(3, record(code, fingerprint="ffffffffffffffff", fingerprint_outputs=near))  # a rounding boundary's flip
    runner.check_fingerprint(opts, lay, "shaw", 5, code)
    assert not same_code(code, record(code, fingerprint_outputs=[v + 2 * TOLERANCE for v in near]))  # hash alike
    assert same_code({"fingerprint": "a"}, {"fingerprint": "a"}) and not same_code({"fingerprint": "a"}, code)
    far = [v + 0.01 for v in code["fingerprint_outputs"]]
    keep(4, record(code, fingerprint="0123456789abcdef", fingerprint_outputs=far), folder="study")  # training now
    with pytest.raises(RuntimeError) as refused:
        runner.check_fingerprint(opts, lay, "shaw", 5, code)
    message = str(refused.value)
    assert message.startswith("shaw seed 5: this model code has fingerprint 00112233aabbccdd, but shaw seed 4 (")
    assert "was trained with fingerprint 0123456789abcdef (commit c0ffee)" in message
    assert "differ by up to 0.01, more than 1e-05" in message and "git worktree add DIR c0ffee" in message
    assert "a results folder of their own (--results)" in message
    with pytest.raises(RuntimeError, match="shaw seed 4: .* but shaw seed 2 "):  # seed 4's code against the others
        runner.check_fingerprint(opts, lay, "shaw", 4, record(code, fingerprint="0123456789abcdef",
                                                              fingerprint_outputs=far))
