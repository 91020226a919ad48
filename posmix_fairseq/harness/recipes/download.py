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

Alignment. Lines are split at newlines (LF) only (CR LF counts as one newline): U+2028, U+2029, U+0085, form
feeds and lone carriage returns occur inside sentences of crawled corpora and are not line ends here
(Python's ``str.splitlines()`` would break there and shift one side). In the files written, each such
character is replaced by a space, so that every reader (Python's text files, fairseq-preprocess,
SentencePiece) sees one sentence per line; the count is printed. Both sides of every corpus (every
file, every test set) must have the same number of lines before corpora are concatenated: a mismatch is
an error naming the corpus and both counts, never a truncation. Bytes that are not UTF-8 are an error
naming the file and the line. Archives are read in one streaming pass, member by member, for both
languages. An archive whose checksum is published (:data:`PUBLISHED_CHECKSUMS`, or an MD5 in the
installed sacreBLEU's registry for the same URL) is checked after the download and whenever it is read
from the cache.

``--mtdata``: the corpora that `mtdata <https://github.com/thammegowda/mtdata>`_ indexes (the
:attr:`Source.mtdata` IDs: Europarl and CommonCrawl of WMT13, Europarl v9, News Commentary v14, for
de-en and fr-en) are fetched through it instead (its cache, its parsers, ``python -m mtdata echo ID``),
checked as above; the others as without the flag. mtdata is an optional extra (``pip install mtdata``,
or ``pip install -e .[mtdata]``), needed only when ``--mtdata`` is given.

    python -m posmix_fairseq.harness.recipes.download wmt14_en_de RAW_DIR -s en -t de [--paper hc] [--mtdata]
"""
import argparse
import fnmatch
import glob
import gzip
import hashlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass, replace
from typing import IO, Dict, Iterable, List, Optional, Tuple

from ..command import add_language_options, check_languages, strip_bom, write_atomic
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

#: mtdata's ISO 639-3 codes of the languages of the corpora it fetches here (its dataset IDs name them)
MTDATA_LANGS = {"de": "deu", "en": "eng", "fr": "fra"}

#: (algorithm, hex digest) of archives whose publisher states a checksum, by URL. None of the URLs above
#: has one on its page (statmt.org, fairseq's script, OPUS, the Hugging Face hub list none): the checks
#: that run come from the installed sacreBLEU's registry (:func:`published_checksum`).
PUBLISHED_CHECKSUMS: Dict[str, Tuple[str, str]] = {}


class DownloadError(SystemExit):
    """Data that cannot be used as it is (misaligned, not UTF-8, a wrong checksum): the message says which."""

    def __init__(self, message: str):
        super().__init__(f"download: {message}")


@dataclass(frozen=True)
class Source:
    split: str        # train | valid | test | newstest_all
    kind: str         # tgz | tsv | zip | iwslt-tags | iwslt17-tags | iwslt-xml | sacrebleu | manual
    where: str        # URL, sacreBLEU test set, or the manual instructions
    member: str = ""  # tgz/zip member pattern ({l}: language) or IWSLT pair/set
    note: str = ""
    checked: str = ""
    mtdata: str = ""  # mtdata's dataset ID of this corpus (--mtdata), "" where mtdata has none

    def corpus(self, lang: str = "") -> str:
        """The corpus named in errors: the URL (with ``lang`` filled in) and the member or test set."""
        where = self.where.format(l=lang) if lang and "{l}" in self.where else self.where
        return where + (f" [{self.member}]" if self.member else "")

    def describe(self) -> str:
        what = {"sacrebleu": f"sacreBLEU test set '{self.where}'", "manual": f"manual: {self.where}"}.get(
            self.kind, f"{self.where}" + (f" [{self.member}]" if self.member else ""))
        return f"{self.split:12s} {what}" + (f" ({self.note})" if self.note else "")


def _mtdata_id(name: str, version: str, pair: str) -> str:
    """mtdata's ID of a Statmt corpus for ``pair`` (``de-en``): ``Statmt-NAME-VERSION-deu-eng``."""
    return "-".join(["Statmt", name, version, *(MTDATA_LANGS[x] for x in pair.split("-"))])


def _wmt14_train(pair: str, full: bool) -> List[Source]:
    s = [Source("train", "tgz", f"{SMT}/wmt13/training-parallel-europarl-v7.tgz", f"*europarl-v7.{pair}.{{l}}", checked=CHECKED_STATMT,
                mtdata=_mtdata_id("europarl_wmt13", "7", pair)),
         Source("train", "tgz", f"{SMT}/wmt13/training-parallel-commoncrawl.tgz", f"*commoncrawl.{pair}.{{l}}", checked=CHECKED_STATMT,
                mtdata=_mtdata_id("commoncrawl_wmt13", "1", pair))]
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
                Source("train", "iwslt17-tags", f"{WIT3_GITHUB}/2017-01-trnted/texts/en/de/en-de.tgz", "en-de",
                       "substitute: IWSLT17's en-de training talks; wit3.fbk.eu no longer serves the 2016 release",
                       "the archive sacreBLEU's registry uses for iwslt17/tst2010-2015 (installed sacrebleu)")]\
            + [Source("valid", "sacrebleu", f"iwslt17/{t}", checked="sacreBLEU registry")
               for t in ("dev2010", "tst2010", "tst2011", "tst2012", "tst2014")]\
            + [Source("test", "sacrebleu", "iwslt17/tst2013", note="HC footnotes 9 and 13 (iwslt2017/tst2013)",
                      checked="sacreBLEU registry")]
    if task == "iwslt17_en_ja":
        a, b = (src or "en", tgt or "ja")
        url = f"{IWSLT17_HUB}/{a}/{b}/{a}-{b}.zip"
        return [Source("train", "iwslt17-tags", url, f"{a}-{b}", "HC Table 1: 223,108 pairs", CHECKED_HUB)]\
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
                       checked=CHECKED_STATMT, mtdata=_mtdata_id("commoncrawl_wmt13", "1", "de-en")),
                Source("train", "tsv", f"{SMT}/europarl/v9/training/europarl-v9.de-en.tsv.gz", "de,en", checked=CHECKED_STATMT,
                       mtdata=_mtdata_id("europarl", "9", "de-en")),
                Source("train", "tsv", f"{DSMT}/news-commentary/v14/training/news-commentary-v14.de-en.tsv.gz", "de,en",
                       checked=CHECKED_STATMT, mtdata=_mtdata_id("news_commentary", "14", "de-en")),
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

def published_checksum(url: str) -> Optional[Tuple[str, str]]:
    """(algorithm, hex digest) published for ``url``: :data:`PUBLISHED_CHECKSUMS`, else the MD5 the installed
    sacreBLEU's registry lists for the same URL (it checks its own downloads with them); None if neither has one."""
    if url in PUBLISHED_CHECKSUMS:
        return PUBLISHED_CHECKSUMS[url]
    try:
        # sacrebleu loads in tenths of a second: only when an archive is fetched
        from sacrebleu.dataset import DATASETS
    except ImportError:
        return None
    for ds in DATASETS.values():
        urls, sums = list(getattr(ds, "data", None) or []), list(getattr(ds, "md5", None) or [])
        if url in urls and len(sums) == len(urls):
            return "md5", sums[urls.index(url)]
    return None


def file_digest(path: str, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_checksum(path: str, url: str) -> None:
    """A :class:`DownloadError` when ``path`` (fetched from ``url``) does not have its published checksum."""
    known = published_checksum(url)
    if known is None:
        return
    algorithm, expected = known
    got = file_digest(path, algorithm)
    if got.lower() != expected.lower():
        raise DownloadError(f"{path} (from {url}): {algorithm} {got}, but the published checksum is {expected}; "
                            "the file is damaged or not the published one. Delete it to download it again")


def fetch(url: str, cache: str) -> str:
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, url.rstrip("/").split("/")[-1])
    if not os.path.exists(path):
        print(f"download: {url}", flush=True)
        try:
            urllib.request.urlretrieve(url, path + ".part")
        except OSError as e:
            raise SystemExit(f"download: cannot fetch {url} ({e}); put the raw files in the data directory instead")
        check_checksum(path + ".part", url)
        os.replace(path + ".part", path)
    else:
        check_checksum(path, url)
    return path


#: in-line characters that other readers take for line ends (str.splitlines(), Python's text files, which
#: end lines at a lone CR): written as a space
IN_LINE_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def read_lines(stream: IO[bytes], name: str) -> List[str]:
    """The lines of a binary stream, split at newlines (LF) only (a CR before one is dropped), each decoded as
    UTF-8, without a byte-order mark: a :class:`DownloadError` names ``name`` and the line of the first byte that
    is not."""
    lines = []
    for number, raw in enumerate(stream, 1):  # a binary stream's lines end at b"\n" only
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DownloadError(f"{name}: line {number} is not UTF-8 (byte 0x{raw[e.start]:02x} at column "
                                f"{e.start + 1})") from None
        if line.endswith("\n"):
            line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
        lines.append(strip_bom(line) if number == 1 else line)
    return lines


def text_lines(data: bytes, name: str) -> List[str]:
    """:func:`read_lines` of bytes in memory (a child process's output)."""
    return read_lines(io.BytesIO(data), name)


ARCHIVE_SUFFIXES = (".tgz", ".tar.gz", ".tar", ".zip")


def _seekable(stream) -> bool:
    try:
        return stream.seekable()
    except (AttributeError, OSError):  # a member of a tar stream asks its stream, which cannot seek
        return False


def archive_lines(path: str, patterns: Dict[str, str]) -> Dict[str, Tuple[str, List[str]]]:
    """key -> (member, lines) for each regular expression in ``patterns``: the lines of the member of the
    tar/zip archive ``path`` (nested archives included, a ``.gz`` member gunzipped) whose name matches it
    (where several do, the first in sorted order). One streaming pass: members are read one at a time,
    never the whole archive."""
    found: Dict[str, Tuple[str, List[str]]] = {}

    def visit(name: str, stream: IO[bytes]):
        if name.endswith(ARCHIVE_SUFFIXES):
            walk(stream, name)
            return
        for key, pattern in patterns.items():
            if re.search(pattern, name) and (key not in found or name < found[key][0]):
                text = gzip.GzipFile(fileobj=stream) if name.endswith(".gz") else stream
                found[key] = (name, read_lines(text, f"{path}: {name}"))
                return

    def walk(stream: IO[bytes], name: str):
        if name.endswith(".zip"):
            if not _seekable(stream):  # a zip inside a tar stream: a zip's directory is at its end
                spooled = tempfile.TemporaryFile()
                shutil.copyfileobj(stream, spooled)
                spooled.seek(0)
                stream = spooled
            with zipfile.ZipFile(stream) as z:
                for info in z.infolist():
                    if not info.is_dir():
                        with z.open(info) as member:
                            visit(info.filename, member)
        else:
            with tarfile.open(fileobj=stream, mode="r|*") as tar:  # "r|": a stream, read once, in order
                for member in tar:
                    if member.isfile():
                        visit(member.name, tar.extractfile(member))

    with open(path, "rb") as f:
        walk(f, path)
    return found


def member_lines(path: str, patterns: Dict[str, str], shown: Dict[str, str]) -> Dict[str, List[str]]:
    """:func:`archive_lines`, every pattern found (else an error naming the archive and ``shown[key]``)."""
    found = archive_lines(path, patterns)
    for key in patterns:
        if key not in found:
            raise DownloadError(f"{path} has no member matching {shown[key]}")
    return {key: lines for key, (_, lines) in found.items()}


def check_aligned(corpus: str, src: str, tgt: str, src_lines: List, tgt_lines: List, what: str = "lines"):
    """Both sides of one corpus have as many lines: else a :class:`DownloadError` naming it and both counts."""
    if len(src_lines) != len(tgt_lines):
        raise DownloadError(f"{corpus}: {len(src_lines)} {src} {what} but {len(tgt_lines)} {tgt} {what}; "
                            "its sides are not line-aligned (nothing was written)")


#: the tag lines fairseq's prepare-iwslt14.sh drops from train.tags; its IWSLT 2017 scripts
#: (prepare-iwslt17-multilingual.sh) also drop speaker, reviewer, translator and document lines
IWSLT_TAG_LINES = {"iwslt-tags": ("<url>", "<talkid>", "<keywords>"),
                   "iwslt17-tags": ("<url>", "<talkid>", "<keywords>", "<speaker>", "<reviewer", "<translator",
                                    "<doc", "</doc>")}


def iwslt_train_pairs(path: str, pair: str, src: str, tgt: str, kind: str = "iwslt-tags") -> Tuple[List[str], List[str]]:
    """train.tags lines as fairseq's scripts keep them (:data:`IWSLT_TAG_LINES`): the tag lines dropped, the
    <title>/<description> tags removed (their text kept), other lines as they are. The two sides must then
    have as many lines (tag lines such as a translator's may be on one side only)."""
    found = member_lines(path, {lang: rf"train\.tags\.{pair}\.{lang}$" for lang in (src, tgt)},
                         {lang: f"train.tags.{pair}.{lang}" for lang in (src, tgt)})
    kept = {}
    for lang, lines in found.items():
        kept[lang] = [re.sub(r"</?(title|description)>", "", line).strip() for line in lines
                      if not any(t in line for t in IWSLT_TAG_LINES[kind])]
    check_aligned(f"{path} [train.tags.{pair}]", src, tgt, kept[src], kept[tgt], "lines (tag lines dropped)")
    return kept[src], kept[tgt]


def iwslt_xml_pairs(path: str, pair: str, name: str, src: str, tgt: str) -> Tuple[List[str], List[str]]:
    found = member_lines(path, {lang: rf"{re.escape(name)}\.{pair}\.{lang}\.xml$" for lang in (src, tgt)},
                         {lang: f"*{name}.{pair}.{lang}.xml" for lang in (src, tgt)})
    segs = {lang: [re.sub(r"<[^>]+>", "", x).strip() for x in lines if "<seg" in x] for lang, lines in found.items()}
    check_aligned(f"{path} [{name}.{pair}]", src, tgt, segs[src], segs[tgt], "segments")
    return segs[src], segs[tgt]


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
    proc = subprocess.run(cmd, capture_output=True)  # bytes: split at "\n" only
    if proc.returncode != 0:
        raise SystemExit(f"download: {' '.join(cmd)} failed: {proc.stderr.decode('utf-8', 'replace')[-500:]}")
    return text_lines(proc.stdout, " ".join(cmd))


def mtdata_pairs(dataset_id: str, src: str, tgt: str) -> Tuple[List[str], List[str]]:
    """The pairs of mtdata's dataset ``dataset_id`` (``python -m mtdata echo ID``: one tab-separated pair a line,
    in the ID's language order), as (``src`` lines, ``tgt`` lines)."""
    if importlib.util.find_spec("mtdata") is None:
        raise DownloadError("--mtdata: the mtdata package is not installed in this environment (pip install mtdata, "
                            "or pip install -e .[mtdata]); without --mtdata the stage downloads the same corpora itself")
    order = dataset_id.split("-")[-2:]
    iso = {MTDATA_LANGS.get(lang): lang for lang in (src, tgt)}
    if set(order) != set(iso) or None in iso:
        raise DownloadError(f"mtdata dataset {dataset_id}: its languages {'-'.join(order)} are not {src}-{tgt}")
    cmd = [sys.executable, "-m", "mtdata", "echo", dataset_id]
    print(f"download: {' '.join(cmd[1:])}", flush=True)
    proc = subprocess.run(cmd, capture_output=True)
    if proc.returncode != 0:
        raise DownloadError(f"{' '.join(cmd[1:])} failed (exit status {proc.returncode}): "
                            f"{proc.stderr.decode('utf-8', 'replace')[-500:]}")
    sides = {iso[order[0]]: [], iso[order[1]]: []}
    for number, row in enumerate(text_lines(proc.stdout, f"mtdata echo {dataset_id}"), 1):
        cols = row.split("\t")
        if len(cols) != 2:
            raise DownloadError(f"mtdata echo {dataset_id}: line {number} has {len(cols)} tab-separated columns, "
                                "not 2 (a pair)")
        sides[iso[order[0]]].append(cols[0])
        sides[iso[order[1]]].append(cols[1])
    return sides[src], sides[tgt]


def tsv_pairs(path: str, columns: str, src: str, tgt: str) -> Tuple[List[str], List[str]]:
    """The ``src`` and ``tgt`` columns of a gzipped TSV (``columns``: its languages, e.g. "de,en"). A row
    without a column for a language gives an empty side (the pair is dropped as empty); their count is printed."""
    names = columns.split(",")
    with gzip.open(path, "rb") as f:
        rows = [row.split("\t") for row in read_lines(f, path)]
    short = sum(1 for row in rows if len(row) < len(names))
    if short:
        print(f"download: {path}: {short} rows have fewer than {len(names)} tab-separated columns; "
              "their missing side is empty and the pair is dropped")
    cols = {lang: names.index(lang) for lang in (src, tgt)}
    return tuple([(row + [""] * len(names))[cols[lang]] for row in rows] for lang in (src, tgt))


def source_pairs(e: Source, src: str, tgt: str, cache: str, use_mtdata: bool = False) -> Tuple[List[str], List[str]]:
    """Both sides of one corpus, line-aligned (checked)."""
    if use_mtdata and e.mtdata:
        s, t = mtdata_pairs(e.mtdata, src, tgt)
    elif e.kind in ("tgz", "zip"):
        path = fetch(e.where, cache)
        found = member_lines(path, {lang: fnmatch.translate(e.member.format(l=lang)) for lang in (src, tgt)},
                             {lang: e.member.format(l=lang) for lang in (src, tgt)})
        s, t = found[src], found[tgt]
    elif e.kind == "gz":
        sides = []
        for lang in (src, tgt):
            path = fetch(e.where.format(l=lang), cache)
            with gzip.open(path, "rb") as f:
                sides.append(read_lines(f, path))
        s, t = sides
    elif e.kind == "tsv":
        s, t = tsv_pairs(fetch(e.where, cache), e.member, src, tgt)
    elif e.kind in IWSLT_TAG_LINES:
        s, t = iwslt_train_pairs(fetch(e.where, cache), e.member, src, tgt, e.kind)
    elif e.kind == "iwslt-xml":
        pair, name = e.member.split(":")
        s, t = iwslt_xml_pairs(fetch(e.where, cache), pair, name, src, tgt)
    elif e.kind == "sacrebleu":
        s, t = sacrebleu_echo(e.where, src, tgt, "src"), sacrebleu_echo(e.where, src, tgt, "ref")
    else:
        raise SystemExit(f"download: unknown source kind {e.kind!r}")
    check_aligned(e.corpus(src) if e.kind == "gz" else e.corpus(), src, tgt, s, t)
    return s, t


def one_line(line: str) -> str:
    """``line`` with the characters other readers take for line ends (:data:`IN_LINE_BREAKS`) as spaces."""
    return IN_LINE_BREAKS.sub(" ", line)


def collect(entries: List[Source], src: str, tgt: str, cache: str,
            use_mtdata: bool = False) -> Tuple[List[str], List[str], List[str]]:
    """The split's pairs, every corpus checked for alignment before it is appended; pairs with an empty
    side are dropped."""
    out_s, out_t, manual = [], [], []
    for e in entries:
        if e.kind == "manual":
            manual.append(e.where)
            continue
        s, t = source_pairs(e, src, tgt, cache, use_mtdata)
        out_s.extend(s)
        out_t.extend(t)
    pairs = [(s, t) for s, t in zip(out_s, out_t) if s.strip() and t.strip()]
    return [p[0] for p in pairs], [p[1] for p in pairs], manual


def write_lines(path: str, lines: Iterable[str]) -> int:
    """Writes one line per sentence; returns how many held an in-line break (written as a space)."""
    changed = 0

    def write(f):
        nonlocal changed
        for line in lines:
            fixed = one_line(line)
            changed += fixed != line
            f.write((fixed + "\n").encode("utf-8"))

    write_atomic(path, write)
    return changed


def download(task: str, raw_dir: str, src: str, tgt: str, paper: str = "", use_mtdata: bool = False) -> Dict[str, int]:
    """Fetches ``task``'s corpora into ``raw_dir/{split}.{src,tgt}``; returns the pairs per split. Nothing is
    written unless every corpus is aligned and readable."""
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
        s, t, manual = collect(chosen, src, tgt, cache, use_mtdata)
        result[split] = (s, t)
        manual_all += manual
    for split, (s, t) in result.items():
        for lang, lines in ((src, s), (tgt, t)):
            path = os.path.join(raw_dir, f"{split}.{lang}")
            changed = write_lines(path, lines)
            if changed:
                print(f"download: {path}: {changed} lines held U+2028, U+2029, U+0085, a form feed or another "
                      "character that some readers take for a line end; each is written as a space")
        print(f"download: {split}: {len(s)} pairs -> {raw_dir}/{split}.{{{src},{tgt}}}")
    for m in manual_all:
        print(f"download: NOT downloaded (manual): {m}; append it to {raw_dir}/train.* to match the paper")
    for f in glob.glob(os.path.join(cache, "*.part")):
        os.remove(f)
    return {k: len(v[0]) for k, v in result.items()}


def main(argv: Optional[List[str]] = None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task", choices=sorted(TASKS))
    p.add_argument("raw_dir")
    add_language_options(p, required=True, dests=("src", "tgt"))
    p.add_argument("--paper", default="", help="whose data selection (e.g. hc: WMT14 En-Fr's subset)")
    p.add_argument("--mtdata", action="store_true",
                   help="fetch the corpora mtdata indexes through it (pip install mtdata); the others as without it")
    a = p.parse_args(argv)
    check_languages(p, a)
    os.makedirs(a.raw_dir, exist_ok=True)
    download(a.task, a.raw_dir, a.src, a.tgt, a.paper, a.mtdata)


if __name__ == "__main__":
    main()
