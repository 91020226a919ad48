"""The download stage offline: every sacreBLEU test set a recipe names is in the installed sacreBLEU's
registry with its language pair, and IWSLT14's split is fairseq's prepare-iwslt14.sh's (tag lines
filtered, pairs cleaned as clean-corpus-n.perl -ratio 1.5 1 175, every 23rd kept pair held out), on a
small tarball in the release's layout (no network; a few seconds)."""
import io
import tarfile

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
