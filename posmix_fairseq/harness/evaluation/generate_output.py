"""Reading the text that ``fairseq-generate`` prints.

fairseq-generate writes, per test sentence ``i`` (``fairseq_cli/generate.py``):

- ``S-i<TAB>source`` and ``T-i<TAB>reference``: the dictionary's tokens after ``--post-process``
  (alias ``--remove-bpe``), then decoded by ``--bpe`` and ``--tokenizer`` (so with ``--bpe
  sentencepiece`` they are plain text); unknown reference words read ``<<unk>>``;
- ``H-i<TAB>score<TAB>hypothesis``: the tokens after ``--post-process`` only (``--bpe`` does not
  touch them);
- ``D-i<TAB>score<TAB>hypothesis``: the H- line decoded by ``--bpe`` and ``--tokenizer``;
- ``P-i`` (per-token scores) and, on request, ``A-i`` (alignment), ignored here.

Sentences come out in batch order, so every field is re-sorted by ``i`` here. With ``--nbest N``
only the first (best) hypothesis of each sentence is kept; an S- or T- line whose id was already seen
(two outputs concatenated) is an error. Sentences a recipe did not translate (too
long for the model's position tables) are named by ``untranslated``: they must be absent, every other
id present. Which of these lines still hold subword
units is read from the lines themselves (``detok.Detokenizer.decode``), not from fairseq's logged
configuration: with hydra-core 1.3 that log goes to stderr, not into the file.
"""
from dataclasses import dataclass, field
from typing import Collection, Dict, List

from ..command import read_text


@dataclass
class GenerateOutput:
    path: str
    sources: List[str] = field(default_factory=list)
    references: List[str] = field(default_factory=list)
    hypotheses: List[str] = field(default_factory=list)
    detok_hypotheses: List[str] = field(default_factory=list)
    ids: List[int] = field(default_factory=list)
    #: "S", "T" or "D" -> the sentence ids whose line is missing where other sentences have one
    incomplete: Dict[str, List[int]] = field(default_factory=dict)

    def missing_lines(self, kind: str) -> str:
        """A message for the ``kind``- lines missing from some sentences ("" if none are)."""
        missing = self.incomplete.get(kind, [])
        if not missing:
            return ""
        return (f"{self.path}: {len(missing)} of {len(self.ids)} sentences have no {kind}- line (ids "
                f"{missing[:10]}{' ...' if len(missing) > 10 else ''}); the file is cut or edited")


def read_generate_output(path: str, untranslated: Collection[int] = ()) -> GenerateOutput:
    fields: Dict[str, Dict[int, str]] = {"S": {}, "T": {}, "H": {}, "D": {}}
    for line_no, line in enumerate(read_text(path).split("\n"), 1):
        if len(line) < 3 or line[1] != "-" or line[0] not in fields:
            continue
        head, _, rest = line.partition("\t")
        try:
            idx = int(head[2:])
        except ValueError:
            continue  # e.g. a log line that happens to start with "S-"
        kind = line[0]
        if kind in "HD":
            parts = rest.split("\t", 1)  # score, text
            if len(parts) != 2:
                raise ValueError(f"{path}:{line_no}: {kind}-line without '<score><TAB><text>': {line!r}")
            rest = parts[1]
        if kind in "ST" and idx in fields[kind]:  # written once per sentence, even with --nbest
            raise ValueError(f"{path}:{line_no}: sentence id {idx} appears twice ({kind}-{idx} lines): two "
                             "fairseq-generate outputs concatenated? Score each output as its own system")
        fields[kind].setdefault(idx, rest)  # first = best of --nbest
    ids = sorted(fields["H"])
    if not ids:
        raise ValueError(f"{path}: no 'H-<id>' lines; is this the output of fairseq-generate?")
    skipped = set(untranslated)
    if skipped & set(ids):
        raise ValueError(f"{path}: sentence ids {sorted(skipped & set(ids))[:10]} are listed as untranslated but "
                         "have hypotheses")
    expected = [i for i in range(len(ids) + len(skipped)) if i not in skipped]
    if ids != expected:
        missing = sorted(set(range(max(ids) + 1)) - set(ids))[:10]
        raise ValueError(f"{path}: hypotheses for sentence ids {missing} are missing ({len(ids)} of {max(ids) + 1}); "
                         "was fairseq-generate run with --required-batch-size-multiple 1 (see README)?")
    out = GenerateOutput(path=path, ids=ids)
    out.hypotheses = [fields["H"][i] for i in ids]
    for kind, attr in (("D", "detok_hypotheses"), ("T", "references"), ("S", "sources")):
        missing = [i for i in ids if i not in fields[kind]]
        if not missing:
            setattr(out, attr, [fields[kind][i] for i in ids])
        elif fields[kind]:
            out.incomplete[kind] = missing
    return out
