"""The download stage offline: every sacreBLEU test set a recipe names is in the installed sacreBLEU's
registry with its language pair, and IWSLT14's split is fairseq's prepare-iwslt14.sh's (tag lines
filtered, pairs cleaned as clean-corpus-n.perl -ratio 1.5 1 175, every 23rd kept pair held out), on a
small tarball in the release's layout (no network; a few seconds). Data that never misaligns: sentences
holding U+2028, U+0085 or form feeds, a corpus with a line more on one side, bytes that are not UTF-8,
nested archives read as streams, published checksums, and the optional mtdata route (a stand-in
`python -m mtdata`)."""
import gzip
import hashlib
import importlib.util
import io
import os
import re
import subprocess
import sys
import tarfile
import zipfile

import pytest
from sacremoses import MosesTokenizer

from posmix_fairseq.harness.recipes import download
from posmix_fairseq.harness.recipes.settings import TASKS


def directions(task):
    spec = TASKS[task]
    pairs = [(spec.src, spec.tgt)]
    if task in ("iwslt16_en_de", "iwslt17_en_ja", "wmt16_en_ro"):  # both directions
        pairs.append((spec.tgt, spec.src))
    return pairs


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_sacrebleu_source_is_in_the_installed_registry(task):
    for paper in TASKS[task].papers:
        for src, tgt in directions(task):
            for source in download.sources(task, paper, src, tgt):
                if source.kind == "sacrebleu":
                    assert download.sacrebleu_check(source, src, tgt).startswith(
                        f"in the installed sacreBLEU's registry with {src}-{tgt}"), (source, src, tgt)
                else:
                    assert source.kind == "manual" or source.checked, source


def make_iwslt14_tarball(path, de, en):
    def xml(lines):
        return "".join(f'<seg id="{i}"> {x} </seg>\n' for i, x in enumerate(lines, 1)).encode()

    members = {"de-en/train.tags.de-en.de": "\n".join(de).encode(), "de-en/train.tags.de-en.en": "\n".join(en).encode()}
    for name in ("TED.dev2010", "TEDX.dev2012", "TED.tst2010", "TED.tst2011", "TED.tst2012"):
        members[f"de-en/IWSLT14.{name}.de-en.de.xml"] = xml([f"{name} satz eins", f"{name} satz zwei"])
        members[f"de-en/IWSLT14.{name}.de-en.en.xml"] = xml([f"{name} sentence one", f"{name} sentence two"])
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_iwslt14_split_is_prepare_iwslt14s(tmp_path, monkeypatch):
    de, en = [], []
    for i in range(60):
        de.append(f"das ist satz nummer {i} .")
        en.append(f"this is sentence number {i} .")
    de[3:3], en[3:3] = ["<url>http://x</url>", "<talkid>7</talkid>", "<keywords>a, b</keywords>"], \
        ["<url>http://x</url>", "<talkid>7</talkid>", "<keywords>a, b</keywords>"]
    de[10:10], en[10:10] = ["<title>Ein Titel</title>"], ["<title>A title</title>"]
    de[20:20], en[20:20] = [" ".join(["lang"] * 180)], [" ".join(["long"] * 180)]  # > 175 tokens
    de[30:30], en[30:30] = ["kurz"], ["this one is far too long for its source"]   # ratio > 1.5
    tarball = tmp_path / "de-en.tgz"
    make_iwslt14_tarball(tarball, de, en)
    monkeypatch.setattr(download, "fetch", lambda url, cache: str(tarball))
    raw = tmp_path / "raw"
    raw.mkdir()
    counts = download.download("iwslt14_de_en", str(raw), "de", "en")

    # expected, computed here as the shell script does it: grep/sed, then clean-corpus-n, then awk NR%23
    tok = {lang: MosesTokenizer(lang=lang) for lang in ("de", "en")}
    kept = []
    for d, e in zip(de, en):
        if any(t in d for t in ("<url>", "<talkid>", "<keywords>")):
            continue
        d, e = (x.replace("<title>", "").replace("</title>", "") for x in (d, e))
        nd, ne = len(tok["de"].tokenize(d, escape=True)), len(tok["en"].tokenize(e, escape=True))
        if 1 <= nd <= 175 and 1 <= ne <= 175 and nd / ne <= 1.5 and ne / nd <= 1.5:
            kept.append((d, e))
    valid = [p for n, p in enumerate(kept, 1) if n % 23 == 0]
    train = [p for n, p in enumerate(kept, 1) if n % 23 != 0]
    assert ("Ein Titel", "A title") in kept and len(kept) == 61  # 60 sentences + the title; 2 pairs cleaned away
    read = lambda split, lang: (raw / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()  # noqa: E731
    assert list(zip(read("valid", "de"), read("valid", "en"))) == valid and len(valid) == 2
    assert list(zip(read("train", "de"), read("train", "en"))) == train
    assert read("test", "en")[:2] == ["TED.dev2010 sentence one", "TED.dev2010 sentence two"]
    assert counts == {"train": len(train), "valid": 2, "test": 10}


# ---- alignment: line ends, per-corpus counts, bytes, archives, checksums, mtdata ---------------------

def add_members(tar_or_zip, members):
    for name, data in members.items():
        if isinstance(tar_or_zip, zipfile.ZipFile):
            tar_or_zip.writestr(name, data)
        else:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar_or_zip.addfile(info, io.BytesIO(data))


def wmt16_files(tmp_path, ep_ro, ep_en, st_en, st_ro):
    """WMT16 En-Ro's two training archives (Europarl v8 .tgz, SETIMES2 .zip) made locally; returns the fake fetch."""
    ep = tmp_path / "training-parallel-ep-v8.tgz"
    with tarfile.open(ep, "w:gz") as tar:
        add_members(tar, {"training-parallel-ep-v8/europarl-v8.ro-en.ro": "\n".join(ep_ro).encode() + b"\n",
                          "training-parallel-ep-v8/europarl-v8.ro-en.en": "\n".join(ep_en).encode() + b"\n"})
    st = tmp_path / "en-ro.txt.zip"
    with zipfile.ZipFile(st, "w") as z:
        add_members(z, {"SETIMES.en-ro.en": "\n".join(st_en).encode() + b"\n",
                        "SETIMES.en-ro.ro": "\n".join(st_ro).encode() + b"\n", "README": b"x"})
    files = {"training-parallel-ep-v8.tgz": str(ep), "en-ro.txt.zip": str(st)}
    return lambda url, cache: files[url.rsplit("/", 1)[-1]]


def fake_sacrebleu(test_set, src, tgt, side):
    return [f"{test_set} {side} {i}" for i in range(3)]


def test_line_separators_inside_sentences_keep_the_sides_aligned(tmp_path, monkeypatch):
    """U+2028, U+2029, U+0085, a form feed and a lone carriage return inside Romanian sentences: str.splitlines()
    would give the Romanian side extra lines; split at newlines only, every pair stays a pair."""
    ep_en = [f"english sentence {i}" for i in range(6)]
    ep_ro = [f"propozitia {i}" for i in range(6)]
    ep_ro[1] = "prima parte\u2028a doua parte"
    ep_ro[2] = "una\x85doua"
    ep_ro[3] = "pagina\x0cnoua"
    ep_ro[4] = "paragraf\u2029nou\rsi inca"
    st_en, st_ro = ["setimes one", "setimes two"], ["setimes unu\u2028", "setimes doi"]
    monkeypatch.setattr(download, "fetch", wmt16_files(tmp_path, ep_ro, ep_en, st_en, st_ro))
    monkeypatch.setattr(download, "sacrebleu_echo", fake_sacrebleu)
    raw = tmp_path / "raw"
    raw.mkdir()
    counts = download.download("wmt16_en_ro", str(raw), "en", "ro")
    assert counts["train"] == 8
    # read back the strictest way: str.splitlines() breaks at every separator, so any left would show
    en = (raw / "train.en").read_text(encoding="utf-8").splitlines()
    ro = (raw / "train.ro").read_text(encoding="utf-8").splitlines()
    assert list(zip(en, ro)) == list(zip(ep_en + st_en, [
        "propozitia 0", "prima parte a doua parte", "una doua", "pagina noua", "paragraf nou si inca",
        "propozitia 5", "setimes unu ", "setimes doi"]))


def test_a_corpus_with_one_line_more_on_one_side_is_an_error_naming_it(tmp_path, monkeypatch, capsys):
    """Europarl's Romanian side has one line more: an error naming that corpus and both counts, before any
    later corpus is appended (never a truncation that shifts every later pair), and nothing written."""
    ep_en = [f"english sentence {i}" for i in range(5)]
    ep_ro = [f"propozitia {i}" for i in range(6)]
    monkeypatch.setattr(download, "fetch", wmt16_files(tmp_path, ep_ro, ep_en, ["a", "b"], ["c", "d"]))
    monkeypatch.setattr(download, "sacrebleu_echo", fake_sacrebleu)
    raw = tmp_path / "raw"
    raw.mkdir()
    with pytest.raises(SystemExit, match=r"training-parallel-ep-v8\.tgz \[\*europarl-v8\.ro-en\.\{l\}\]: 5 en lines "
                                         r"but 6 ro lines; its sides are not line-aligned"):
        download.download("wmt16_en_ro", str(raw), "en", "ro")
    assert not list(raw.glob("train.*"))


def test_a_test_set_whose_sides_differ_is_an_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(download, "fetch", wmt16_files(tmp_path, ["a"], ["b"], ["c"], ["d"]))
    monkeypatch.setattr(download, "sacrebleu_echo",
                        lambda test_set, src, tgt, side: ["x"] * (4 if side == "ref" and test_set == "wmt16" else 3))
    raw = tmp_path / "raw"
    raw.mkdir()
    with pytest.raises(SystemExit, match=r"download: wmt16: 3 en lines but 4 ro lines"):
        download.download("wmt16_en_ro", str(raw), "en", "ro")


def test_bytes_that_are_not_utf8_name_the_file_and_line(tmp_path, monkeypatch):
    """Multi30k's gzipped files: a Latin-1 byte on line 3 of the German side is an error naming the file and
    line, never a replacement character."""
    files = {}
    for lang, lines in (("en", [b"a dog", b"a cat", b"a man"]), ("de", [b"ein hund", b"eine katze", b"ein m\xe4nn"])):
        path = tmp_path / f"train.{lang}.gz"
        path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
        files[f"train.{lang}.gz"] = str(path)
    monkeypatch.setattr(download, "fetch", lambda url, cache: files[url.rsplit("/", 1)[-1]])
    raw = tmp_path / "raw"
    raw.mkdir()
    with pytest.raises(SystemExit, match=r"download: .*train\.de\.gz: line 3 is not UTF-8 \(byte 0xe4 at column 6\)"):
        download.download("multi30k_en_de", str(raw), "en", "de")


def test_archive_members_are_read_in_one_streaming_pass_nested_archives_included(tmp_path, monkeypatch):
    """A zip inside a tar.gz (and a .gz member inside it) is found; the outer archive is opened once, as a
    stream (tarfile mode "r|*"), for both languages."""
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr("corpus/data.en.gz", gzip.compress("one\ntwo\u2028still two\n".encode()))
        z.writestr("corpus/data.de", "eins\nzwei\n")
    outer = tmp_path / "outer.tgz"
    with tarfile.open(outer, "w:gz") as tar:
        add_members(tar, {"release/inner.zip": inner.getvalue()})
    modes = []
    real_open = tarfile.open

    def spy(*args, **kwargs):
        modes.append(kwargs.get("mode"))
        return real_open(*args, **kwargs)

    monkeypatch.setattr(tarfile, "open", spy)
    found = download.archive_lines(str(outer), {"en": r"data\.en\.gz$", "de": r"data\.de$"})
    assert modes == ["r|*"]
    assert found == {"en": ("corpus/data.en.gz", ["one", "two\u2028still two"]), "de": ("corpus/data.de", ["eins", "zwei"])}


def test_a_published_checksum_is_checked(tmp_path, monkeypatch):
    """fetch() checks an archive with a published checksum after downloading it and when it is in the cache."""
    served = tmp_path / "served" / "corpus.tgz"
    served.parent.mkdir()
    served.write_bytes(b"the published bytes")
    url = served.as_uri()
    good = hashlib.md5(b"the published bytes").hexdigest()
    monkeypatch.setitem(download.PUBLISHED_CHECKSUMS, url, ("md5", good))
    cache = tmp_path / "cache"
    path = download.fetch(url, str(cache))
    assert open(path, "rb").read() == b"the published bytes"
    (cache / "corpus.tgz").write_bytes(b"damaged bytes")
    with pytest.raises(SystemExit, match=rf"corpus\.tgz \(from {re.escape(url)}\): md5 [0-9a-f]+, but the published "
                                         rf"checksum is {good}; .*Delete it"):
        download.fetch(url, str(cache))
    monkeypatch.setitem(download.PUBLISHED_CHECKSUMS, url, ("md5", "0" * 32))
    with pytest.raises(SystemExit, match="the published checksum is 0000"):
        download.fetch(url, str(tmp_path / "fresh_cache"))
    assert not (tmp_path / "fresh_cache" / "corpus.tgz").exists()


def test_sacrebleus_registry_gives_the_checksum_of_an_archive_it_lists():
    url = f"{download.WIT3_GITHUB}/2017-01-trnted/texts/en/de/en-de.tgz"  # IWSLT16 En-De's substitute training data
    assert download.published_checksum(url) == ("md5", "d8a32cfc002a4f12b17429cfa78050e6")
    assert download.published_checksum("http://example.org/none.tgz") is None


def test_mtdata_is_imported_only_when_asked_for_and_missing_is_a_clear_error(tmp_path, monkeypatch):
    code = ("import sys; from posmix_fairseq.harness.recipes import download as d; "
            "[d.sources(t, p) for t in d.TASKS for p in d.TASKS[t].papers]; print('mtdata' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mtdata" else real(name, *a))
    raw = tmp_path / "raw"
    raw.mkdir()
    with pytest.raises(SystemExit, match=r"--mtdata: the mtdata package is not installed .*pip install mtdata"):
        download.download("wmt19_de_en", str(raw), "de", "en", use_mtdata=True)


def test_mtdata_pairs_are_checked_and_put_in_the_directions_order(tmp_path, monkeypatch):
    """A stand-in `python -m mtdata echo ID` (rows in the ID's deu-eng order, one with U+2028): the pairs come
    back in the en-de direction asked for, aligned; a row without a tab is an error naming the dataset."""
    fake = tmp_path / "fake" / "mtdata"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(
        "import sys\n"
        "rows = {'Statmt-europarl-9-deu-eng': ['ein satz\\tone sentence', 'zwei\\u2028saetze\\ttwo sentences'],\n"
        "        'Statmt-news_commentary-14-deu-eng': ['kaputt ohne tab']}.get(sys.argv[2], [])\n"
        "sys.stdout.buffer.write(''.join(r + '\\n' for r in rows).encode())\n")
    monkeypatch.syspath_prepend(str(fake.parent))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")]))
    assert download.mtdata_pairs("Statmt-europarl-9-deu-eng", "en", "de") == (
        ["one sentence", "two sentences"], ["ein satz", "zwei\u2028saetze"])
    with pytest.raises(SystemExit, match=r"mtdata echo Statmt-news_commentary-14-deu-eng: line 1 has 1 tab-separated"):
        download.mtdata_pairs("Statmt-news_commentary-14-deu-eng", "en", "de")


def test_the_command_takes_fairseqs_language_flags_and_the_old_ones(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(download, "download", lambda *a: calls.append(a))
    download.main(["wmt16_en_ro", str(tmp_path), "-s", "en", "-t", "ro", "--mtdata"])
    download.main(["wmt16_en_ro", str(tmp_path), "--src", "ro", "--tgt", "en"])
    assert calls == [("wmt16_en_ro", str(tmp_path), "en", "ro", "", True), ("wmt16_en_ro", str(tmp_path), "ro", "en", "", False)]
    assert "--src is deprecated here; use -s/--source-lang" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        download.main(["wmt16_en_ro", str(tmp_path), "-s", "en"])
    assert e.value.code == 2 and "-t/--target-lang" in capsys.readouterr().err


def test_iwslt17_tag_lines_on_one_side_only_are_dropped_before_the_sides_are_compared(tmp_path, monkeypatch):
    """IWSLT 2017's train.tags (the zip HC's En-Ja recipe downloads): reviewer and translator lines on the
    Japanese side only, document lines on both, are dropped as fairseq's IWSLT 2017 scripts drop them, and
    the remaining lines pair up; one line more on one side is still an error naming the archive."""
    def tags(lines, extra):
        return "\n".join(['<doc docid="1" genre="lectures">', "<url>http://x</url>", *extra, "<title>T</title>",
                          *lines, "</doc>"]).encode() + b"\n"

    def xml(lines):
        return "".join(f'<seg id="{i}"> {x} </seg>\n' for i, x in enumerate(lines, 1)).encode()

    def archive(ja_lines):
        path = tmp_path / "en-ja.zip"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("en-ja/train.tags.en-ja.en", tags(["one", "two"], []))
            z.writestr("en-ja/train.tags.en-ja.ja", tags(ja_lines, ['<reviewer href="r">R</reviewer>',
                                                                    '<translator href="t">T</translator>']))
            for name in ("dev2010", "tst2010", "tst2011", "tst2012", "tst2013", "tst2014", "tst2015"):
                z.writestr(f"en-ja/IWSLT17.TED.{name}.en-ja.en.xml", xml(["e"]))
                z.writestr(f"en-ja/IWSLT17.TED.{name}.en-ja.ja.xml", xml(["j"]))
        return str(path)

    monkeypatch.setattr(download, "sacrebleu_echo", fake_sacrebleu)
    monkeypatch.setattr(download, "fetch", lambda url, cache: archive(["ichi", "ni\u2028san"]))
    raw = tmp_path / "raw"
    raw.mkdir()
    assert download.download("iwslt17_en_ja", str(raw), "en", "ja")["train"] == 3  # the title, one, two
    assert (raw / "train.ja").read_text(encoding="utf-8").splitlines() == ["T", "ichi", "ni san"]
    monkeypatch.setattr(download, "fetch", lambda url, cache: archive(["ichi", "ni", "san"]))
    with pytest.raises(SystemExit, match=r"en-ja\.zip \[train\.tags\.en-ja\]: 3 en lines \(tag lines dropped\) but "
                                         r"4 ja lines"):
        download.download("iwslt17_en_ja", str(raw), "en", "ja")
