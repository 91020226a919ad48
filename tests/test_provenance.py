"""What a checkpoint knows of its data and its version (posmix_fairseq/data_fingerprint.py, models/options.py):

- a model loaded with dictionaries other than those it was trained with (same size, other words; or another
  size) is refused by fairseq-generate, ``--restore-file``, ``posmix-freeze --data`` and ``posmix-average``, with a
  message naming both dictionaries and ``--allow-dictionary-mismatch``, which loads it anyway;
- a checkpoint without a fingerprint (older code) loads as before, with a one-line note;
- a checkpoint whose defaults version is newer than the code's is refused, naming both versions.
"""
import logging
import os
import shutil

import pytest
import torch

from helpers import binarized_toy_corpus, run_train
from posmix_fairseq.data_fingerprint import KEY, OPTION, DictionaryMismatch, fingerprint
from posmix_fairseq.harness import checkpoint_files, pipeline
from posmix_fairseq.harness.evaluation import average
from posmix_fairseq.harness.freeze import main as freeze_main
from posmix_fairseq.models.options import DEFAULTS_VERSION, DEFAULTS_VERSION_KEY


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny rPosNet trained one update on the toy corpus (posmix_translation), its data, and two other data
    directories: the same binarized data with a dictionary of the same size whose first two words are swapped,
    and with a dictionary one word larger."""
    root = tmp_path_factory.mktemp("provenance")
    data = binarized_toy_corpus(root, {"train": 120, "valid": 8, "test": 12})
    run_train(data, str(root / "ckpt"), ["--arch", "rposnet_iwslt_de_en", "--task", "posmix_translation"], updates=1)
    swapped, larger = str(root / "swapped"), str(root / "larger")
    for other in (swapped, larger):
        shutil.copytree(data, other)
    path = os.path.join(swapped, "dict.src.txt")
    lines = open(path, encoding="utf-8").read().splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]
    open(path, "w", encoding="utf-8").write("".join(lines))
    with open(os.path.join(larger, "dict.src.txt"), "a", encoding="utf-8") as f:
        f.write("an-extra-word 1\n")
    return {"data": data, "ckpt": str(root / "ckpt" / "checkpoint_last.pt"), "swapped": swapped, "larger": larger}


def read_own(path):
    """A checkpoint read weights-only, fairseq's types allowed (as the plugin allows them, for the whole process)."""
    return checkpoint_files.load(path)


def generate(data, ckpt, *flags):
    """fairseq-generate, in this process (the same command line; errors are raised here)."""
    return pipeline.run(pipeline.generate_command(data, ckpt, ["--beam", "2", "--max-tokens", "2000", "--cpu",
                                                               "--task", "posmix_translation", *flags]),
                        in_process=True)


def test_the_checkpoint_stores_its_dictionaries_fingerprint(run):
    from fairseq.data import Dictionary

    stored = read_own(run["ckpt"])["model"][KEY]
    dictionaries = [Dictionary.load(os.path.join(run["data"], f"dict.{lang}.txt")) for lang in ("src", "tgt")]
    assert stored.dtype == torch.int64 and stored.tolist() == fingerprint(*dictionaries).tolist()
    assert stored[0] == len(dictionaries[0]) and stored[2] == len(dictionaries[1])


def test_generate_refuses_another_dictionary_of_the_same_size_and_the_override_decodes(run, capsys):
    generate(run["data"], run["ckpt"])  # its own data: decodes
    with pytest.raises(DictionaryMismatch) as e:
        generate(run["swapped"], run["ckpt"])
    message = str(e.value)
    assert "the checkpoint was trained with other dictionaries than the task's (source " in message
    assert os.path.join(run["swapped"], "dict.src.txt") in message and OPTION in message
    capsys.readouterr()
    generate(run["swapped"], run["ckpt"], OPTION)
    assert sum(line.startswith("H-") for line in capsys.readouterr().out.splitlines()) == 12


def test_a_dictionary_of_another_size_is_refused_before_the_weights_even_with_the_override(run):
    for flags in ((), (OPTION,)):
        with pytest.raises(DictionaryMismatch, match="of other sizes: no override"):
            generate(run["larger"], run["ckpt"], *flags)


def test_restore_file_refuses_another_dictionary_and_the_override_fine_tunes(run, tmp_path):
    save_dir = str(tmp_path / "finetune")
    flags = ["--arch", "rposnet_iwslt_de_en", "--task", "posmix_translation", "--restore-file", run["ckpt"]]
    with pytest.raises(Exception) as e:  # fairseq's trainer wraps what load_state_dict raises
        run_train(run["swapped"], save_dir, flags, updates=2)
    chain = [e.value]
    while chain[-1].__context__ is not None:
        chain.append(chain[-1].__context__)
    assert any(isinstance(x, DictionaryMismatch) and OPTION in str(x) for x in chain), chain
    run_train(run["swapped"], save_dir, flags + [OPTION], updates=2)
    tuned = read_own(os.path.join(save_dir, "checkpoint_last.pt"))["model"][KEY]
    assert tuned.tolist() != read_own(run["ckpt"])["model"][KEY].tolist()  # it records the data it was tuned on


def test_posmix_freeze_data_refuses_other_dictionaries_and_the_override_freezes(run, tmp_path, capsys):
    out = str(tmp_path / "search.pt")
    for other, sizes in ((run["larger"], True), (run["swapped"], False)):
        with pytest.raises(SystemExit) as e:
            freeze_main([run["ckpt"], out, "--data", other])
        assert e.value.code == 1
        err = capsys.readouterr().err
        assert err.startswith("posmix-freeze: the checkpoint was trained with other dictionaries than the task's")
        assert OPTION in err
        assert ("of other sizes" in err) == sizes and "Traceback" not in err and not os.path.exists(out)
    freeze_main([run["ckpt"], out, "--data", run["swapped"], OPTION])
    assert os.path.exists(out)


def test_posmix_average_refuses_checkpoints_of_other_dictionaries(run, tmp_path, capsys):
    a, b = str(tmp_path / "a.pt"), str(tmp_path / "b.pt")
    shutil.copy(run["ckpt"], a)
    state = read_own(run["ckpt"])
    state["model"][KEY][1] = 12345  # as if trained on a dictionary of the same size with other words
    torch.save(state, b)
    output = str(tmp_path / "avg.pt")
    with pytest.raises(SystemExit) as e:
        average.main(["--inputs", a, b, "--output", output])
    assert f"{a} was trained with other dictionaries than {b}'s (source " in str(e.value.code)
    assert f"posmix-average {OPTION}" in str(e.value.code) and not os.path.exists(output)
    average.main(["--inputs", a, b, "--output", output, OPTION])
    averaged = checkpoint_files.load(output)["model"]
    assert averaged[KEY].tolist() == state["model"][KEY].tolist()  # the newest's, never averaged
    # another size (a larger embedding): refused even with the override, and without fingerprints by shape
    name = "encoder.embed_tokens.weight"
    state["model"][name] = torch.cat([state["model"][name], state["model"][name][:1]])
    state["model"][KEY][0] += 1
    torch.save(state, b)
    with pytest.raises(SystemExit, match="of other sizes"):
        average.main(["--inputs", a, b, "--output", output, OPTION])
    for path in (a, b):
        old = read_own(path)
        del old["model"][KEY]
        torch.save(old, path)
    with pytest.raises(SystemExit) as e:
        average.main(["--inputs", a, b, "--output", output])
    assert f"{b}: its {name} has shape" in str(e.value.code) and "dictionaries have other sizes" in str(e.value.code)


def test_a_checkpoint_without_a_fingerprint_loads_with_a_note(run, tmp_path, caplog):
    old = read_own(run["ckpt"])
    del old["model"][KEY]
    path = str(tmp_path / "old.pt")
    torch.save(old, path)
    caplog.set_level(logging.INFO, logger="posmix_fairseq.data_fingerprint")
    generate(run["swapped"], path)  # not checked: it loads as before
    notes = [r.getMessage() for r in caplog.records if r.name == "posmix_fairseq.data_fingerprint"]
    assert notes == ["the checkpoint stores no dictionary fingerprint (saved by older code): its dictionaries are "
                     "not checked"]
    with pytest.raises(DictionaryMismatch, match="embeddings have .* rows, but the task's source dictionary"):
        generate(run["larger"], path)


def test_a_checkpoint_from_newer_code_is_refused_naming_both_versions(run, tmp_path):
    state = read_own(run["ckpt"])
    args = state["cfg"]["model"]
    setattr(args, DEFAULTS_VERSION_KEY, DEFAULTS_VERSION + 1)
    args.encoder_self_option_named_later = 3  # an option this code does not know
    path = str(tmp_path / "newer.pt")
    torch.save(state, path)
    with pytest.raises(ValueError) as e:
        generate(run["data"], path)
    assert (f"defaults version {DEFAULTS_VERSION + 1}; this code reads up to {DEFAULTS_VERSION}" in str(e.value)
            and "upgrade posmix_fairseq" in str(e.value))
