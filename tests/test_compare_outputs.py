"""scripts/compare_outputs.py: saves configurations' outputs and compares two saves by exit code."""
import importlib.util
import os

import torch

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "compare_outputs.py")


def load_script():
    spec = importlib.util.spec_from_file_location("compare_outputs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_save_then_compare_identical_perturbed_and_missing_outputs(tmp_path, capsys):
    script = load_script()
    names = ["rposnet_iwslt_de_en", "stored_at5_cumulative"]  # a flag configuration and stored arguments
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert script.main(["save", a] + [f for n in names for f in ("--only", n)]) == 0
    assert script.main(["save", b] + [f for n in names for f in ("--only", n)]) == 0
    saved = torch.load(os.path.join(a, script.OUTPUTS), weights_only=False)
    assert sorted(saved) == sorted(names)
    for outputs in saved.values():  # the incremental decode reproduces the full forward
        torch.testing.assert_close(outputs["incremental"], outputs["full"], atol=1e-5, rtol=0)
    assert script.main(["compare", a, b]) == 0
    assert "2 configurations compared, max abs diff 0" in capsys.readouterr().out

    saved["rposnet_iwslt_de_en"]["incremental"][0, 3, 5] += 1e-6
    torch.save(saved, os.path.join(b, script.OUTPUTS))
    assert script.main(["compare", a, b]) == 1
    assert "differ: rposnet_iwslt_de_en" in capsys.readouterr().out
    assert script.main(["compare", a, b, "--tolerance", "2e-6"]) == 0  # within the tolerance asked for
    assert script.main(["compare", a, b, "--tolerance", "5e-7"]) == 1
    assert "differ by more than 5e-07: rposnet_iwslt_de_en" in capsys.readouterr().out

    del saved["rposnet_iwslt_de_en"]
    torch.save(saved, os.path.join(b, script.OUTPUTS))
    assert script.main(["compare", a, b]) == 1
    assert "rposnet_iwslt_de_en: missing from" in capsys.readouterr().out
