"""Undo the recipe's tokenisation so metrics see plain text (the papers score detokenised output:
GPA paper Section 5.1, "All scores are calculated on detokenized text").

Supported steps, applied in this order:

1. ``spm``: the pieces of a SentencePiece model are joined back (``SentencePieceProcessor.decode``),
   as in ``posmix_fairseq.raw_text`` and the Multi30k recipe;
2. ``remove_bpe``: subword-nmt continuation markers are removed (``"@@ "`` by default, as
   ``fairseq-generate --remove-bpe``);
3. ``moses``: Moses detokenisation for a language (``sacremoses.MosesDetokenizer``), for recipes
   that ran the Moses tokenizer before BPE (the WMT and IWSLT recipes).

Anything else (e.g. a Japanese/Chinese character segmentation) is not undone; use ``--hyp`` with
text detokenised by your own step.
"""
from dataclasses import dataclass
from typing import List, Optional


@dataclass
class Detokenizer:
    spm_model: Optional[str] = None
    remove_bpe: Optional[str] = None
    moses_lang: Optional[str] = None

    def __post_init__(self):
        self._sp = None
        self._moses = None
        if self.spm_model:
            import sentencepiece as spm

            try:
                self._sp = spm.SentencePieceProcessor(model_file=self.spm_model)
            except (OSError, RuntimeError) as e:
                raise ValueError(f"--spm-model {self.spm_model}: cannot load a SentencePiece model ({e})") from e
        if self.moses_lang:
            try:
                from sacremoses import MosesDetokenizer
            except ImportError as e:
                raise ValueError("--moses-detok needs the 'sacremoses' package (pip install sacremoses)") from e
            self._moses = MosesDetokenizer(lang=self.moses_lang)

    @property
    def description(self) -> str:
        steps = []
        if self.spm_model:
            steps.append(f"sentencepiece({self.spm_model})")
        if self.remove_bpe:
            steps.append(f"remove-bpe({self.remove_bpe!r})")
        if self.moses_lang:
            steps.append(f"moses-detok({self.moses_lang})")
        return " + ".join(steps) or "none"

    def __call__(self, line: str) -> str:
        if self._sp is not None:
            line = self._sp.decode(line.split())
        if self.remove_bpe:
            marker = self.remove_bpe.rstrip()
            line = (line + " ").replace(self.remove_bpe, "").rstrip()
            if line.endswith(marker):  # a marker on the last token (truncated output)
                line = line[: -len(marker)]
        if self._moses is not None:
            line = self._moses.detokenize(line.split())
        return line

    def lines(self, lines: List[str]) -> List[str]:
        return [self(line) for line in lines]
