"""Recipe stage "download": fetch a task's public corpora into RAW/{train,valid,test}.{src,tgt}.

Needs internet (build machines here have none: put the files in RAW yourself and the stage is skipped).
The sources of each task and paper are in :func:`sources`; ``PLAN=1`` lists them with how each was
checked. Dev and test sets come from sacreBLEU's registry wherever it has them (``sacrebleu -t SET
--echo``; its DATASETS table is in the installed package, so the plan checks those offline). Training
data comes from the URLs below: statmt.org's WMT pages, the IWSLT14 tarball of fairseq's
prepare-iwslt14.sh, OPUS for SETIMES2, the IWSLT 2017 archives. wit3.fbk.eu, the old home of the
IWSLT archives, no longer serves them: the 2017 test sets are at github.com/hlt-mt/WIT3 (the URLs in
sacreBLEU's registry) and the 2017 training archives on the Hugging Face hub (IWSLT/iwslt2017). Corpora
behind a registration or in other formats (CWMT, the UN corpus zh-en, Rapid's XLIFF) are ``manual``:
download them yourself and append them to RAW/train.*.

    python -m posmix_fairseq.harness.recipes.download wmt14_en_de RAW_DIR --src en --tgt de [--paper hc]
"""
import argparse
import fnmatch
import glob
import gzip
import io
import os
import re
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from dataclasses import dataclass, replace
from typing import Dict, List, Tuple

from .settings import TASKS

FB = "http://dl.fbaipublicfiles.com/fairseq/data"
SMT = "http://www.statmt.org"
DSMT = "http://data.statmt.org"
WIT3_GITHUB = "https://raw.githubusercontent.com/hlt-mt/WIT3/master/archive"
IWSLT17_HUB = "https://huggingface.co/datasets/IWSLT/iwslt2017/resolve/main/data/2017-01-trnted/texts"
SETIMES = "https://object.pouta.csc.fi/OPUS-SETIMES/v2/moses"
MULTI30K = "https://github.com/multi30k/dataset/raw/master/data/task1/raw"

CHECKED_STATMT = "not fetched here (no internet); statmt.org's WMT pages list it"
CHECKED_FAIRSEQ = "not fetched here; the URL of fairseq's examples/translation/prepare-iwslt14.sh (read in its repository)"
CHECKED_HUB = ("not fetched here; the Hugging Face dataset IWSLT/iwslt2017 serves the 2017-01-trnted archives "
               "that wit3.fbk.eu no longer serves (public code downloads them from this path)")
CHECKED_OPUS = "not fetched here; OPUS's download location for SETIMES v2 (moses format)"


@dataclass(frozen=True)
class Source:
    split: str        # train | valid | test | newstest_all
    kind: str         # tgz | tsv | zip | iwslt-tags | iwslt-xml | sacrebleu | manual
    where: str        # URL, sacreBLEU test set, or the manual instructions
    member: str = ""  # tgz/zip member pattern ({l}: language) or IWSLT pair/set
    note: str = ""
    checked: str = ""

    def describe(self) -> str:
        what = {"sacrebleu": f"sacreBLEU test set '{self.where}'", "manual": f"manual: {self.where}"}.get(
            self.kind, f"{self.where}" + (f" [{self.member}]" if self.member else ""))
        return f"{self.split:12s} {what}" + (f" ({self.note})" if self.note else "")


def _wmt14_train(pair: str, full: bool) -> List[Source]:
    s = [Source("train", "tgz", f"{SMT}/wmt13/training-parallel-europarl-v7.tgz", f"*europarl-v7.{pair}.{{l}}", checked=CHECKED_STATMT),
         Source("train", "tgz", f"{SMT}/wmt13/training-parallel-commoncrawl.tgz", f"*commoncrawl.{pair}.{{l}}", checked=CHECKED_STATMT)]
    if full:
        s.append(Source("train", "tgz", f"{SMT}/wmt14/training-parallel-nc-v9.tgz", f"*news-commentary-v9.{pair}.{{l}}",
                        checked=CHECKED_STATMT))
    return s


def sources(task: str, paper: str = "", src: str = "", tgt: str = "") -> List[Source]:
    """The sources of ``task`` as ``paper`` used it, for the direction ``src``-``tgt``."""
    if task == "iwslt14_de_en":
        url = f"{FB}/iwslt14/de-en.tgz"
        tests = ["TED.dev2010", "TEDX.dev2012", "TED.tst2010", "TED.tst2011", "TED.tst2012"]
        return ([Source("train", "iwslt-tags", url, "de-en", "fairseq's prepare-iwslt14.sh filtering and cleaning",
                        CHECKED_FAIRSEQ),
                 Source("valid", "iwslt-heldout", url, "23", "every 23rd cleaned training pair (prepare-iwslt14.sh)",
                        CHECKED_FAIRSEQ)]
                + [Source("test", "iwslt-xml", url, f"de-en:{t}", "GPA 5.1 test sets", CHECKED_FAIRSEQ) for t in tests])
    if task == "iwslt16_en_de":
        return [Source("train", "manual", "IWSLT16 en-de training talks (HC Table 1: 196,884 pairs; the 2016-01 WIT3 archive), "
                                          "if you have them"),
                Source("train", "iwslt-tags", f"{WIT3_GITHUB}/2017-01-trnted/texts/en/de/en-de.tgz", "en-de",
                       "substitute: IWSLT17's en-de training talks; wit3.fbk.eu no longer serves the 2016 release",
                       "the archive sacreBLEU's registry uses for iwslt17/tst2010-2015 (installed sacrebleu)")]\
            + [Source("valid", "sacrebleu", f"iwslt17/{t}", checked="sacreBLEU registry")
               for t in ("dev2010", "tst2010", "tst2011", "tst2012", "tst2014")]\
            + [Source("test", "sacrebleu", "iwslt17/tst2013", note="HC footnotes 9 and 13 (iwslt2017/tst2013)",
                      checked="sacreBLEU registry")]
    if task == "iwslt17_en_ja":
        a, b = (src or "en", tgt or "ja")
        url = f"{IWSLT17_HUB}/{a}/{b}/{a}-{b}.zip"
        return [Source("train", "iwslt-tags", url, f"{a}-{b}", "HC Table 1: 223,108 pairs", CHECKED_HUB)]\
            + [Source("valid", "iwslt-xml", url, f"{a}-{b}:{t}", "the released code's dev sets", CHECKED_HUB)
               for t in ("TED.dev2010", "TED.tst2010", "TED.tst2011", "TED.tst2012", "TED.tst2013", "TED.tst2014",
                         "TED.tst2015")]\
            + [Source("test", "sacrebleu", "iwslt17", note="tst2017: 1,452 pairs, HC Table 1 (the released code adds "
                                                           "tst2016)", checked="sacreBLEU registry")]
    if task == "wmt16_en_ro":
        return [Source("train", "tgz", f"{DSMT}/wmt16/translation-task/training-parallel-ep-v8.tgz", "*europarl-v8.ro-en.{l}",
                       checked=CHECKED_STATMT),
                Source("train", "zip", f"{SETIMES}/en-ro.txt.zip", "SETIMES.en-ro.{l}", "SETIMES2", CHECKED_OPUS),
                Source("valid", "sacrebleu", "wmt16/dev", checked="sacreBLEU registry"),
                Source("test", "sacrebleu", "wmt16", checked="sacreBLEU registry")]
    if task == "wmt14_en_de":
        return _wmt14_train("de-en", True) + [Source("valid", "sacrebleu", "wmt13", checked="sacreBLEU registry"),
                                              Source("test", "sacrebleu", "wmt14/full", checked="sacreBLEU registry")]
    if task == "wmt14_en_fr":
        if paper == "hc":
            train = [dataclass_replace(s, note="HC footnote 10: the Europarl / Common Crawl subset")
                     for s in _wmt14_train("fr-en", False)]
        else:
            train = _wmt14_train("fr-en", True) + [
                Source("train", "tgz", f"{SMT}/wmt13/training-parallel-un.tgz", "*undoc.2000.fr-en.{l}", checked=CHECKED_STATMT),
                Source("train", "tgz", f"{SMT}/wmt10/training-giga-fren.tar", "*giga-fren.release2.fixed.{l}.gz",
                       checked=CHECKED_STATMT)]
        return train + [Source("valid", "sacrebleu", "wmt13", checked="sacreBLEU registry"),
                        Source("test", "sacrebleu", "wmt14/full", checked="sacreBLEU registry")]
    if task == "wmt18_en_zh":
        return [Source("train", "tgz", f"{DSMT}/wmt18/translation-task/training-parallel-nc-v13.tgz",
                       "*news-commentary-v13.zh-en.{l}", checked=CHECKED_STATMT),
                Source("train", "manual", "UN v1.0 en-zh (https://conferences.unite.un.org/uncorpus) and CWMT (registration)"),
                Source("valid", "sacrebleu", "wmt17/dev", checked="sacreBLEU registry"),
                Source("test", "sacrebleu", "wmt17", note="newstest2017, GPA 5.1", checked="sacreBLEU registry")]
    if task == "wmt19_de_en":
        return [Source("train", "tgz", f"{SMT}/wmt13/training-parallel-commoncrawl.tgz", "*commoncrawl.de-en.{l}",
                       checked=CHECKED_STATMT),
                Source("train", "tsv", f"{SMT}/europarl/v9/training/europarl-v9.de-en.tsv.gz", "de,en", checked=CHECKED_STATMT),
                Source("train", "tsv", f"{DSMT}/news-commentary/v14/training/news-commentary-v14.de-en.tsv.gz", "de,en",
                       checked=CHECKED_STATMT),
                Source("train", "manual", "Rapid 2019 de-en (http://data.statmt.org/wmt19/translation-task/rapid-2019.de-en.xlf.gz, XLIFF)"),
                Source("valid", "sacrebleu", "wmt15", note="newstest2015, PEA 4.1", checked="sacreBLEU registry"),
                Source("test", "sacrebleu", "wmt18", note="newstest2018, PEA Table 1", checked="sacreBLEU registry")]\
            + [Source("newstest_all", "sacrebleu", f"wmt{y:02d}", note="PEA 4.2", checked="sacreBLEU registry")
               for y in range(8, 19) if y != 15]
    if task == "wmt19_zh_en":
        return [Source("train", "tsv", f"{DSMT}/news-commentary/v14/training/news-commentary-v14.en-zh.tsv.gz", "en,zh",
                       checked=CHECKED_STATMT),
                Source("train", "manual", "UN v1.0 en-zh and CWMT (registration), as in WMT19"),
                Source("valid", "sacrebleu", "wmt17/dev", note="newsdev2017, PEA 4.1", checked="sacreBLEU registry"),
                Source("valid", "sacrebleu", "wmt17", note="newstest2017, PEA 4.1", checked="sacreBLEU registry"),
                Source("test", "sacrebleu", "wmt19", note="newstest2019, PEA Table 1", checked="sacreBLEU registry")]
    if task == "multi30k_en_de":
        return [Source("train", "gz", f"{MULTI30K}/train.{{l}}.gz", checked="not fetched here; the multi30k/dataset repository"),
                Source("valid", "gz", f"{MULTI30K}/val.{{l}}.gz", checked="not fetched here; the multi30k/dataset repository"),
                Source("test", "sacrebleu", "multi30k/2016", checked="sacreBLEU registry")]
    raise ValueError(f"no download sources for task {task!r}")


def dataclass_replace(s: Source, **kw) -> Source:
    return replace(s, **kw)


def sacrebleu_check(source: Source, src: str, tgt: str) -> str:
    """Whether the installed sacreBLEU's registry has the set and the language pair (offline)."""
    try:
        # sacrebleu loads in tenths of a second: only for this check
        from sacrebleu.dataset import DATASETS
    except ImportError:
        return "sacreBLEU not installed"
    ds = DATASETS.get(source.where)
    if ds is None:
        return "MISSING from the installed sacreBLEU's registry"
    pairs = getattr(ds, "langpairs", {}) or {}
    pair = f"{src}-{tgt}"
    return (f"in the installed sacreBLEU's registry with {pair}" if pair in pairs
            else f"in the installed sacreBLEU's registry, but without {pair} ({', '.join(sorted(pairs))})")


# ---- fetching --------------------------------------------------------------------------------------

def fetch(url: str, cache: str) -> str:
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, url.rstrip("/").split("/")[-1])
    if not os.path.exists(path):
        print(f"download: {url}", flush=True)
        try:
            urllib.request.urlretrieve(url, path + ".part")
        except OSError as e:
            raise SystemExit(f"download: cannot fetch {url} ({e}); put the raw files in the data directory instead")
        os.replace(path + ".part", path)
    return path


def _archive_members(path: str, name_re: str) -> Dict[str, bytes]:
    """Members of a tgz/zip archive (nested archives included) whose names match ``name_re``."""
    out = {}

    def visit(name: str, data: bytes):
        if name.endswith((".tgz", ".tar.gz", ".tar", ".zip")):
            walk(io.BytesIO(data), name)
        elif re.search(name_re, name):
            out[name] = data

    def walk(fileobj, name):
        if name.endswith(".zip"):
            with zipfile.ZipFile(fileobj) as z:
                for m in z.namelist():
                    if not m.endswith("/"):
                        visit(m, z.read(m))
        else:
            with tarfile.open(fileobj=fileobj) as tar:
                for m in tar.getmembers():
                    if m.isfile():
                        visit(m.name, tar.extractfile(m).read())

    with open(path, "rb") as f:
        walk(io.BytesIO(f.read()), path)
    return out


def _one(path: str, name_re: str, what: str) -> str:
    found = _archive_members(path, name_re)
    if not found:
        raise SystemExit(f"download: {path} has no member matching {what}")
    name = sorted(found)[0]
    data = gzip.decompress(found[name]) if name.endswith(".gz") else found[name]
    return data.decode("utf-8", errors="replace")


def iwslt_train_lines(path: str, pair: str, lang: str) -> List[str]:
    """train.tags lines as fairseq's prepare-iwslt14.sh keeps them: lines with <url>, <talkid> or
    <keywords> dropped, the <title>/<description> tags removed (their text kept), other lines as they are."""
    text = _one(path, rf"train\.tags\.{pair}\.{lang}$", f"train.tags.{pair}.{lang}")
    keep = []
    for line in text.splitlines():
        if any(t in line for t in ("<url>", "<talkid>", "<keywords>")):
            continue
        line = re.sub(r"</?(title|description)>", "", line).strip()
        keep.append(line)
    return keep


def iwslt_xml_lines(path: str, pair: str, name: str, lang: str) -> List[str]:
    text = _one(path, rf"{re.escape(name)}\.{pair}\.{lang}\.xml$", f"*{name}.{pair}.{lang}.xml")
    return [re.sub(r"<[^>]+>", "", x).strip() for x in text.splitlines() if "<seg" in x]


def clean_pairs(src: List[str], tgt: List[str], src_lang: str, tgt_lang: str, low=1, high=175, ratio=1.5):
    """Moses clean-corpus-n.perl (-ratio 1.5, 1..175 tokens) on the Moses-tokenised text, as
    prepare-iwslt14.sh runs it; returns the kept raw pairs."""
    from sacremoses import MosesTokenizer  # sacremoses loads in half a second: only when cleaning

    tok = {src_lang: MosesTokenizer(lang=src_lang), tgt_lang: MosesTokenizer(lang=tgt_lang)}
    kept_s, kept_t = [], []
    for s, t in zip(src, tgt):
        ns = len(tok[src_lang].tokenize(s.replace("|", ""), escape=True))
        nt = len(tok[tgt_lang].tokenize(t.replace("|", ""), escape=True))
        if not (low <= ns <= high and low <= nt <= high) or ns / nt > ratio or nt / ns > ratio:
            continue
        kept_s.append(s)
        kept_t.append(t)
    return kept_s, kept_t


def sacrebleu_echo(test_set: str, src: str, tgt: str, side: str) -> List[str]:
    cmd = [sys.executable, "-m", "sacrebleu", "-t", test_set, "-l", f"{src}-{tgt}", "--echo", side]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"download: {' '.join(cmd)} failed: {proc.stderr[-500:]}")
    return proc.stdout.splitlines()


def collect(entries: List[Source], src: str, tgt: str, cache: str) -> Tuple[List[str], List[str], List[str]]:
    out = {src: [], tgt: []}
    manual = []
    for e in entries:
        if e.kind == "manual":
            manual.append(e.where)
            continue
        for lang in (src, tgt):
            if e.kind in ("tgz", "zip"):
                lines = _one(fetch(e.where, cache), fnmatch.translate(e.member.format(l=lang)),
                             e.member.format(l=lang)).splitlines()
            elif e.kind == "gz":
                with gzip.open(fetch(e.where.format(l=lang), cache), "rt", encoding="utf-8") as f:
                    lines = [x.rstrip("\n") for x in f]
            elif e.kind == "tsv":
                col = e.member.split(",").index(lang)
                with gzip.open(fetch(e.where, cache), "rt", encoding="utf-8") as f:
                    lines = [(row.rstrip("\n").split("\t") + ["", ""])[col] for row in f]
            elif e.kind == "iwslt-tags":
                lines = iwslt_train_lines(fetch(e.where, cache), e.member, lang)
            elif e.kind == "iwslt-xml":
                pair, name = e.member.split(":")
                lines = iwslt_xml_lines(fetch(e.where, cache), pair, name, lang)
            elif e.kind == "sacrebleu":
                lines = sacrebleu_echo(e.where, src, tgt, "src" if lang == src else "ref")
            else:
                raise SystemExit(f"download: unknown source kind {e.kind!r}")
            out[lang].extend(lines)
    n = min(len(out[src]), len(out[tgt]))
    if len(out[src]) != len(out[tgt]):
        print(f"download: {len(out[src])} vs {len(out[tgt])} lines; keeping the first {n}")
    pairs = [(s, t) for s, t in zip(out[src][:n], out[tgt][:n]) if s.strip() and t.strip()]
    return [p[0] for p in pairs], [p[1] for p in pairs], manual


def download(task: str, raw_dir: str, src: str, tgt: str, paper: str = "") -> Dict[str, int]:
    entries = sources(task, paper, src, tgt)
    cache = os.path.join(raw_dir, "downloads")
    result, manual_all = {}, []
    for split in ("train", "valid", "test", "newstest_all"):
        chosen = [e for e in entries if e.split == split]
        if not chosen:
            continue
        if chosen[0].kind == "iwslt-heldout":  # fairseq's prepare-iwslt14.sh: clean, then every 23rd pair
            k = int(chosen[0].member)
            s, t = clean_pairs(*result["train"], src, tgt)
            result["valid"] = ([x for i, x in enumerate(s) if (i + 1) % k == 0], [x for i, x in enumerate(t) if (i + 1) % k == 0])
            result["train"] = ([x for i, x in enumerate(s) if (i + 1) % k], [x for i, x in enumerate(t) if (i + 1) % k])
            continue
        s, t, manual = collect(chosen, src, tgt, cache)
        result[split] = (s, t)
        manual_all += manual
    for split, (s, t) in result.items():
        for lang, lines in ((src, s), (tgt, t)):
            with open(os.path.join(raw_dir, f"{split}.{lang}"), "w", encoding="utf-8") as f:
                f.writelines(x + "\n" for x in lines)
        print(f"download: {split}: {len(s)} pairs -> {raw_dir}/{split}.{{{src},{tgt}}}")
    for m in manual_all:
        print(f"download: NOT downloaded (manual): {m}; append it to {raw_dir}/train.* to match the paper")
    for f in glob.glob(os.path.join(cache, "*.part")):
        os.remove(f)
    return {k: len(v[0]) for k, v in result.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task", choices=sorted(TASKS))
    p.add_argument("raw_dir")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
    p.add_argument("--paper", default="", help="whose data selection (e.g. hc: WMT14 En-Fr's subset)")
    a = p.parse_args()
    os.makedirs(a.raw_dir, exist_ok=True)
    download(a.task, a.raw_dir, a.src, a.tgt, a.paper)


if __name__ == "__main__":
    main()
