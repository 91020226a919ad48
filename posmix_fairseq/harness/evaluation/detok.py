"""Undo the recipe's tokenisation so metrics see plain text (the papers score detokenised output:
GPA paper Section 5.1, "All scores are calculated on detokenized text").

The steps, in this order:

1. ``spm``: the pieces of a SentencePiece model are joined back (``SentencePieceProcessor.decode``),
   as in ``posmix_fairseq.harness.raw_text`` and the recipes' ``prepare`` stage;
2. ``remove_bpe``: subword-nmt continuation markers (``@@ ``) are removed, or SentencePiece pieces joined, as
   fairseq's ``data_utils.post_process(line, "subword_nmt" | "sentencepiece")`` does (what ``fairseq-generate
   --post-process`` does). Its one line per step is repeated here (:func:`remove_subword_nmt`,
   :func:`join_pieces`), not called: importing fairseq imports torch, which posmix-score on text never loads;
   tests/test_evaluation_score.py checks the two against fairseq's function;
3. ``moses``: Moses detokenisation for a language (``sacremoses.MosesDetokenizer``), for recipes
   that ran the Moses tokenizer before the subword step.

Never twice. ``fairseq-generate`` may have undone the subword step itself, and on different lines
depending on its flags (``fairseq_cli/generate.py``): ``--post-process sentencepiece|subword_nmt``
(alias ``--remove-bpe``) applies to the S-, T- and H- lines; ``--bpe sentencepiece|subword_nmt``
(with ``--tokenizer moses``) decodes the S- and T- lines and writes D- lines, but leaves the H- lines
as pieces. So the subword steps run on a set of lines only when those lines still hold subword units:
SentencePiece's word-boundary mark ``▁`` (U+2581, on every word of SentencePiece output, never in
decoded text) or a ``@@`` continuation marker. Decoding already-decoded text with the SentencePiece
model would glue its words together ("Ein Mann" -> "EinMann"). Moses detokenisation is applied when
asked: on detokenised text it changes nothing (measured: 0 of the 3,000 Multi30k test lines in de, en
and fr change when detokenised a second time).

Anything else (e.g. a Japanese/Chinese character segmentation) is not undone; use ``--hyp`` with
text detokenised by your own step.
"""
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ..command import load_sentencepiece

#: SentencePiece's word-boundary symbol (U+2581 LOWER ONE EIGHTH BLOCK)
SPM_BOUNDARY = "\u2581"
BPE_MARKER = "@@"
#: the values of --remove-bpe (fairseq-generate's): subword-nmt's '@@ ' markers, or SentencePiece pieces
REMOVE_BPE_CHOICES = ("subword_nmt", "sentencepiece")


def has_spm_pieces(lines: List[str]) -> bool:
    return any(SPM_BOUNDARY in line for line in lines)


def has_bpe_markers(lines: List[str]) -> bool:
    return any(BPE_MARKER + " " in line or line.endswith(BPE_MARKER) for line in lines)


@dataclass
class Detokenizer:
    spm_model: Optional[str] = None
    remove_bpe: Optional[str] = None  # one of REMOVE_BPE_CHOICES (True: subword_nmt)
    moses_lang: Optional[str] = None

    def __post_init__(self):
        self._sp = None
        self._moses = None
        if self.remove_bpe is True:
            self.remove_bpe = "subword_nmt"
        if self.remove_bpe not in (None, False) + REMOVE_BPE_CHOICES:
            raise ValueError(f"--remove-bpe {self.remove_bpe}: valid values are {', '.join(REMOVE_BPE_CHOICES)}")
        self.remove_bpe = self.remove_bpe or None
        if self.spm_model:
            self._sp = load_sentencepiece(self.spm_model, "--spm-model")
        if self.moses_lang:
            try:
                # sacremoses loads in half a second: only with --moses-detok
                from sacremoses import MosesDetokenizer
            except ImportError as e:
                raise ValueError("--moses-detok needs the 'sacremoses' package (pip install sacremoses)") from e
            self._moses = MosesDetokenizer(lang=self.moses_lang)

    @property
    def description(self) -> str:
        """The steps asked for."""
        steps = []
        if self.spm_model:
            steps.append(f"sentencepiece({self.spm_model})")
        if self.remove_bpe:
            steps.append(f"remove-bpe({self.remove_bpe})")
        if self.moses_lang:
            steps.append(f"moses-detok({self.moses_lang})")
        return " + ".join(steps) or "none"

    def decode(self, lines: List[str], what: str) -> Tuple[List[str], str]:
        """(decoded lines, the steps applied to them); ``what`` names the lines in messages (e.g.
        "H- lines of gen.txt"). Subword steps run only on lines that still hold subword units; lines
        that hold units no asked-for step removes are an error (they would be scored as pieces)."""
        steps, skipped = [], []
        spm_here, bpe_here = has_spm_pieces(lines), has_bpe_markers(lines)
        spm_removed = self.remove_bpe == "sentencepiece"
        if spm_here and self._sp is None and not spm_removed:
            raise ValueError(f"the {what} hold SentencePiece pieces ('{SPM_BOUNDARY}'): pass --spm-model MODEL "
                             "or --remove-bpe sentencepiece (or --use-detok-lines for the D- lines of "
                             "fairseq-generate --bpe sentencepiece)")
        if bpe_here and self.remove_bpe != "subword_nmt":
            raise ValueError(f"the {what} hold subword-nmt markers ('{BPE_MARKER} '): pass --remove-bpe")
        if self._sp is not None:
            if spm_here:
                lines = [self._sp.decode(line.split()) for line in lines]
                steps.append("sentencepiece")
            else:
                skipped.append("sentencepiece")
        if self.remove_bpe == "sentencepiece" and self._sp is None:
            if spm_here:
                lines = [join_pieces(line) for line in lines]
                steps.append("remove-bpe(sentencepiece)")
            else:
                skipped.append("remove-bpe(sentencepiece)")
        if self.remove_bpe == "subword_nmt":
            if bpe_here:
                lines = [remove_subword_nmt(line) for line in lines]
                steps.append("remove-bpe")
            else:
                skipped.append("remove-bpe")
        if self._moses is not None:
            lines = [self._moses.detokenize(line.split()) for line in lines]
            steps.append(f"moses-detok({self.moses_lang})")
        text = " + ".join(steps) or "as they are"
        if skipped:
            text += f" ({', '.join(skipped)} not applied: no subword units left, already decoded by fairseq-generate)"
        return lines, text


def join_pieces(line: str) -> str:
    """SentencePiece pieces back to text, as fairseq's ``post_process(line, "sentencepiece")``."""
    return line.replace(" ", "").replace(SPM_BOUNDARY, " ").strip()


def remove_subword_nmt(line: str) -> str:
    """subword-nmt's '@@ ' markers removed, as fairseq's ``post_process(line, "subword_nmt")``."""
    return (line + " ").replace(BPE_MARKER + " ", "").rstrip()


def check_plain(lines: List[str], what: str, hint: str) -> None:
    """Text that is used as it is must hold no subword units."""
    if has_spm_pieces(lines) or has_bpe_markers(lines):
        unit = f"SentencePiece pieces ('{SPM_BOUNDARY}')" if has_spm_pieces(lines) else f"subword-nmt markers ('{BPE_MARKER} ')"
        raise ValueError(f"the {what} hold {unit}; {hint}")
