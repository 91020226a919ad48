"""What identifies the data a model was trained on: its source and target dictionaries' fingerprints.

A model reads word ids; a dictionary turns them into words. A dictionary of the same size with other words
(another ``fairseq-preprocess`` run, another BPE) loads without any shape error and translates every
sentence with the wrong words. So the model keeps, beside its weights, the size and a hash of the symbols (in
order) of each dictionary it was built with: a buffer in its state dict, ``data_fingerprint`` =
[source size, source hash, target size, target hash]. Loading a state dict (fairseq-generate,
``--restore-file``, ``posmix-freeze``) compares the stored fingerprint with the one of the dictionaries at hand
and refuses a mismatch, unless the task's ``--allow-dictionary-mismatch`` is given; a state dict without one
(saved by older code) loads as before, with a one-line note.
"""
import hashlib
import logging
import os
from typing import Optional, Sequence

import torch

logger = logging.getLogger(__name__)

KEY = "data_fingerprint"
OPTION = "--allow-dictionary-mismatch"
SIDES = ("source", "target")


class DictionaryMismatch(ValueError):
    """A model loaded with dictionaries other than those it was trained with."""


def symbols_hash(symbols: Sequence[str]) -> int:
    """63 bits of SHA-256 over the symbols in order (an int64 holds it)."""
    digest = hashlib.sha256("\n".join(symbols).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def fingerprint(source_dictionary, target_dictionary) -> torch.Tensor:
    """[source size, source hash, target size, target hash] of two fairseq dictionaries."""
    values = []
    for d in (source_dictionary, target_dictionary):
        values += [len(d.symbols), symbols_hash(d.symbols)]
    return torch.tensor(values, dtype=torch.int64)


def attach_fingerprint(model, task):
    """``model`` (just built for ``task``) with the fingerprint of the task's dictionaries as a buffer, the
    task's ``allow_dictionary_mismatch`` and the dictionaries' files (for messages)."""
    model.register_buffer(KEY, fingerprint(task.source_dictionary, task.target_dictionary))
    cfg = getattr(task, "cfg", None)
    model.allow_dictionary_mismatch = bool(getattr(cfg, "allow_dictionary_mismatch", False))
    data, langs = getattr(cfg, "data", None), (getattr(cfg, "source_lang", None), getattr(cfg, "target_lang", None))
    if data and all(langs):
        model.dictionary_files = [os.path.join(str(data).split(os.pathsep)[0], f"dict.{lang}.txt") for lang in langs]
    return model


def describe(values: Sequence[int], files: Optional[Sequence[str]] = None) -> str:
    """``source 4096 symbols #1a2b3c4d (FILE), target ...``: sizes, short hashes and the files if known."""
    values = [int(v) for v in values]
    return ", ".join(f"{side} {values[2 * i]} symbols #{values[2 * i + 1]:016x}"[:-8]  # 8 hex digits of the hash
                     + (f" ({files[i]})" if files else "") for i, side in enumerate(SIDES))


def mismatch(stored: Sequence[int], given: Sequence[int], stored_what: str, given_what: str,
             given_files: Optional[Sequence[str]] = None) -> Optional[str]:
    """The refusal's text when the fingerprints differ (None when they are equal)."""
    stored, given = [int(v) for v in stored], [int(v) for v in given]
    if stored == given:
        return None
    sizes = "" if stored[0::2] == given[0::2] else "; of other sizes: no override can load these embeddings"
    return (f"{stored_what} was trained with other dictionaries than {given_what}'s ({describe(stored)}; "
            f"{given_what}'s: {describe(given, given_files)}{sizes}): every word id would be read as another word. "
            f"Use the training data's dictionaries (fairseq-preprocess --srcdict/--tgtdict), or, if the two "
            f"dictionaries mean the same words, pass {OPTION}")


def check_state_dict(model, state_dict, prefix: str, what: str = "the checkpoint") -> None:
    """Run when ``model`` loads ``state_dict`` (its ``upgrade_state_dict_named``): a stored fingerprint must
    equal the model's (its dictionaries'), unless ``model.allow_dictionary_mismatch``; one without is noted and
    takes the model's, once the embeddings' sizes are checked against the dictionaries."""
    own = getattr(model, KEY, None)
    if own is None:
        return
    key = prefix + KEY
    files = getattr(model, "dictionary_files", None)
    if key in state_dict:
        text = mismatch(state_dict[key].tolist(), own.tolist(), what, "the task", files)
        if text and (not getattr(model, "allow_dictionary_mismatch", False) or "other sizes" in text):
            raise DictionaryMismatch(text)
        if text:
            logger.warning("%s: loaded anyway (%s)", text.split(": every word id")[0], OPTION)
        state_dict[key] = own.detach().clone().cpu()
        return
    logger.info("%s stores no dictionary fingerprint (saved by older code): its dictionaries are not checked", what)
    for i, side in enumerate(("encoder", "decoder")):
        stored = state_dict.get(f"{prefix}{side}.embed_tokens.weight")
        if stored is not None and stored.shape[0] != int(own[2 * i]):
            raise DictionaryMismatch(f"{what}'s {SIDES[i]} embeddings have {stored.shape[0]} rows, but the task's "
                                     f"{SIDES[i]} dictionary" + (f" ({files[i]})" if files else "")
                                     + f" has {int(own[2 * i])} symbols: the model was trained with other dictionaries")
    state_dict[key] = own.detach().clone().cpu()
