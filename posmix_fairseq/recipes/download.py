"""Recipe stage "download": fetch a task's public corpora into RAW/{train,valid,test}.{src,tgt}.

Needs internet (these build machines have none: put the files in RAW yourself and the stage is
skipped). Sources, per task, are in ``SOURCES`` below: WIT3/fairseq tarballs for IWSLT (TED XML and
``train.tags`` files), statmt.org tarballs/TSVs for WMT training data, and ``sacrebleu --echo`` for WMT
dev/test sets. Corpora that need a registration or a special format (CWMT, the UN corpus zh-en, Rapid's
XLIFF) are listed as ``manual``: download them yourself and append them to RAW/train.*.

    python -m posmix_fairseq.recipes.download wmt14_en_de RAW_DIR [--src en --tgt de]
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
from typing import List

FB = "http://dl.fbaipublicfiles.com/fairseq/data"
WIT3 = "https://wit3.fbk.eu/archive"
SMT = "http://www.statmt.org"
DSMT = "http://data.statmt.org"


def _iwslt(url, pair, valid, test, valid_from_train=0):
    return {"train": [("iwslt-tags", url, pair)], "valid": [("iwslt-xml", url, pair, s) for s in valid],
            "test": [("iwslt-xml", url, pair, s) for s in test], "valid_from_train": valid_from_train}


SOURCES = {
    # GPA paper 5.1: TED dev10, dev12, tst10, tst11, tst12 concatenated as the test set (6750 pairs);
    # validation as fairseq's prepare-iwslt14.sh: every 23rd training pair held out.
    "iwslt14_de_en": _iwslt(f"{FB}/iwslt14/de-en.tgz", "de-en", [],
                            ["TED.dev2010", "TEDX.dev2012", "TED.tst2010", "TED.tst2011", "TED.tst2012"], 23),
    # HC paper footnote 9/13: IWSLT16 En-De, BLEU on tst2013 (the "dev set" of prior work)
    "iwslt16_en_de": _iwslt(f"{WIT3}/2016-01//texts/en/de/en-de.tgz", "en-de", ["TED.dev2010"], ["TED.tst2013"]),
    "iwslt17_en_ja": _iwslt(f"{WIT3}/2017-01-trnted//texts/en/ja/en-ja.tgz", "en-ja", ["TED.dev2010"], ["TED.tst2015"]),
    "wmt14_en_de": {"train": [("tgz", f"{SMT}/wmt13/training-parallel-europarl-v7.tgz", "*europarl-v7.de-en.{l}"),
                              ("tgz", f"{SMT}/wmt13/training-parallel-commoncrawl.tgz", "*commoncrawl.de-en.{l}"),
                              ("tgz", f"{SMT}/wmt14/training-parallel-nc-v9.tgz", "*news-commentary-v9.de-en.{l}")],
                    "valid": [("sacrebleu", "wmt13")], "test": [("sacrebleu", "wmt14/full")]},
    "wmt14_en_fr": {"train": [("tgz", f"{SMT}/wmt13/training-parallel-europarl-v7.tgz", "*europarl-v7.fr-en.{l}"),
                              ("tgz", f"{SMT}/wmt13/training-parallel-commoncrawl.tgz", "*commoncrawl.fr-en.{l}"),
                              ("tgz", f"{SMT}/wmt14/training-parallel-nc-v9.tgz", "*news-commentary-v9.fr-en.{l}"),
                              ("tgz", f"{SMT}/wmt13/training-parallel-un.tgz", "*undoc.2000.fr-en.{l}"),
                              ("tgz", f"{SMT}/wmt10/training-giga-fren.tar", "*giga-fren.release2.fixed.{l}.gz")],
                    "valid": [("sacrebleu", "wmt13")], "test": [("sacrebleu", "wmt14/full")]},
    "wmt16_en_ro": {"train": [("tgz", f"{DSMT}/wmt16/translation-task/training-parallel-ep-v8.tgz", "*europarl-v8.ro-en.{l}"),
                              ("manual", "SETIMES2 en-ro (OPUS, https://opus.nlpl.eu/SETIMES.php, moses format)")],
                    "valid": [("sacrebleu", "wmt16/dev")], "test": [("sacrebleu", "wmt16")]},
    "wmt18_en_zh": {"train": [("tgz", f"{DSMT}/wmt18/translation-task/training-parallel-nc-v13.tgz", "*news-commentary-v13.zh-en.{l}"),
                              ("manual", "UN v1.0 en-zh (https://conferences.unite.un.org/uncorpus) and CWMT (registration)")],
                    "valid": [("sacrebleu", "wmt17/dev")], "test": [("sacrebleu", "wmt17")]},
    # APE paper 4.1: CommonCrawl, Europarl, News-Commentary, Rapid; newstest2015 dev; newstest2018 test;
    # newstest_all = newstest2008-2018 without 2015 (built by the recipe's "newstest_all" stage)
    "wmt19_de_en": {"train": [("tgz", f"{SMT}/wmt13/training-parallel-commoncrawl.tgz", "*commoncrawl.de-en.{l}"),
                              ("tsv", f"{SMT}/europarl/v9/training/europarl-v9.de-en.tsv.gz", ("de", "en")),
                              ("tsv", f"{DSMT}/news-commentary/v14/training/news-commentary-v14.de-en.tsv.gz", ("de", "en")),
                              ("manual", "Rapid 2019 de-en (http://data.statmt.org/wmt19/translation-task/rapid-2019.de-en.xlf.gz, XLIFF)")],
                    "valid": [("sacrebleu", "wmt15")], "test": [("sacrebleu", "wmt18")],
                    "newstest_all": [f"wmt{y:02d}" for y in range(8, 19) if y != 15]},
    "wmt19_zh_en": {"train": [("tsv", f"{DSMT}/news-commentary/v14/training/news-commentary-v14.en-zh.tsv.gz", ("en", "zh")),
                              ("manual", "UN v1.0 en-zh and CWMT (registration), as in WMT19")],
                    "valid": [("sacrebleu", "wmt17/dev"), ("sacrebleu", "wmt17")], "test": [("sacrebleu", "wmt19")]},
}


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


def _tar_lines(path: str, pattern: str) -> List[str]:
    with tarfile.open(path) as tar:
        names = [m for m in tar.getmembers() if fnmatch.fnmatch(m.name, pattern)]
        if not names:
            raise SystemExit(f"download: {path} has no member matching {pattern}")
        data = tar.extractfile(names[0]).read()
    if names[0].name.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace").splitlines()


def _iwslt_tar(path: str, suffix_re: str) -> dict:
    """Members of a WIT3 tarball (nested tgz in some releases) whose names match suffix_re."""
    out = {}
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            if not m.isfile():
                continue
            if m.name.endswith(".tgz"):
                inner = tarfile.open(fileobj=io.BytesIO(tar.extractfile(m).read()))
                for im in inner.getmembers():
                    if im.isfile() and re.search(suffix_re, im.name):
                        out[os.path.basename(im.name)] = inner.extractfile(im).read().decode("utf-8")
            elif re.search(suffix_re, m.name):
                out[os.path.basename(m.name)] = tar.extractfile(m).read().decode("utf-8")
    return out


def iwslt_train(path, pair, lang):
    files = _iwslt_tar(path, rf"train\.tags\.{pair}\.{lang}$")
    if not files:
        raise SystemExit(f"download: no train.tags.{pair}.{lang} in {path}")
    return [x.strip() for x in next(iter(files.values())).splitlines() if x.strip() and not x.lstrip().startswith("<")]


def iwslt_xml(path, pair, name, lang):
    files = _iwslt_tar(path, rf"{re.escape(name)}\.{pair}\.{lang}\.xml$")
    if not files:
        raise SystemExit(f"download: no *{name}.{pair}.{lang}.xml in {path}")
    return [re.sub(r"<[^>]+>", "", x).strip() for x in next(iter(files.values())).splitlines() if "<seg" in x]


def sacrebleu_echo(test_set: str, src: str, tgt: str, side: str) -> List[str]:
    cmd = [sys.executable, "-m", "sacrebleu", "-t", test_set, "-l", f"{src}-{tgt}", "--echo", side]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"download: {' '.join(cmd)} failed: {proc.stderr[-500:]}")
    return proc.stdout.splitlines()


def collect(task: str, split: str, src: str, tgt: str, cache: str):
    spec = SOURCES[task]
    out = {src: [], tgt: []}
    manual = []
    for entry in spec[split]:
        kind = entry[0]
        if kind == "manual":
            manual.append(entry[1])
            continue
        for lang in (src, tgt):
            if kind == "tgz":
                lines = _tar_lines(fetch(entry[1], cache), entry[2].format(l=lang))
            elif kind == "tsv":
                col = entry[2].index(lang)
                with gzip.open(fetch(entry[1], cache), "rt", encoding="utf-8") as f:
                    lines = [(row.rstrip("\n").split("\t") + ["", ""])[col] for row in f]
            elif kind == "iwslt-tags":
                lines = iwslt_train(fetch(entry[1], cache), entry[2], lang)
            elif kind == "iwslt-xml":
                lines = iwslt_xml(fetch(entry[1], cache), entry[2], entry[3], lang)
            elif kind == "sacrebleu":
                lines = sacrebleu_echo(entry[1], src, tgt, "src" if lang == src else "ref")
            out[lang].extend(lines)
    n = min(len(out[src]), len(out[tgt]))
    if len(out[src]) != len(out[tgt]):
        print(f"download: {task} {split}: {len(out[src])} vs {len(out[tgt])} lines; keeping the first {n}")
    pairs = [(s, t) for s, t in zip(out[src][:n], out[tgt][:n]) if s.strip() and t.strip()]
    return [p[0] for p in pairs], [p[1] for p in pairs], manual


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task", choices=sorted(SOURCES))
    p.add_argument("raw_dir")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
    a = p.parse_args()
    cache = os.path.join(a.raw_dir, "downloads")
    result, manual_all = {}, []
    for split in ("train", "valid", "test"):
        if split == "valid" and SOURCES[a.task].get("valid_from_train"):
            k = SOURCES[a.task]["valid_from_train"]
            s, t = result["train"]
            result["valid"] = ([x for i, x in enumerate(s) if i % k == 0], [x for i, x in enumerate(t) if i % k == 0])
            result["train"] = ([x for i, x in enumerate(s) if i % k], [x for i, x in enumerate(t) if i % k])
            continue
        s, t, manual = collect(a.task, split, a.src, a.tgt, cache)
        result[split] = (s, t)
        manual_all += manual
    if SOURCES[a.task].get("newstest_all"):
        s, t = [], []
        for ts in SOURCES[a.task]["newstest_all"]:
            s += sacrebleu_echo(ts, a.src, a.tgt, "src")
            t += sacrebleu_echo(ts, a.src, a.tgt, "ref")
        result["newstest_all"] = (s, t)
    for split, (s, t) in result.items():
        for lang, lines in ((a.src, s), (a.tgt, t)):
            with open(os.path.join(a.raw_dir, f"{split}.{lang}"), "w", encoding="utf-8") as f:
                f.writelines(x + "\n" for x in lines)
        print(f"download: {split}: {len(s)} pairs -> {a.raw_dir}/{split}.{{{a.src},{a.tgt}}}")
    for m in manual_all:
        print(f"download: NOT downloaded (manual): {m}; append it to {a.raw_dir}/train.* to match the paper")
    for f in glob.glob(os.path.join(cache, "*.part")):
        os.remove(f)


if __name__ == "__main__":
    main()
