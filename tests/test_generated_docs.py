"""The docs' tables of variants, mixers and options are what the registries and the arch table say
(posmix_fairseq/harness/docs.py renders them; ``python -m posmix_fairseq.harness.docs`` rewrites them)."""
import pytest

from posmix_fairseq.harness import docs


@pytest.mark.parametrize("page", docs.PAGES)
def test_each_page_holds_the_tables_the_code_renders(page):
    with open(f"{docs.ROOT}/{page}", encoding="utf-8") as f:
        text = f.read()
    assert docs.rewrite(text) == text, f"{page}: stale generated tables; run {docs.COMMAND}"


def test_the_pages_have_their_generated_tables():
    names = set()
    for page in docs.PAGES:
        with open(f"{docs.ROOT}/{page}", encoding="utf-8") as f:
            names |= {docs.START.match(line).group(1) for line in f.read().splitlines() if docs.START.match(line)}
    assert names == set(docs.RENDERERS)


def test_a_stale_block_is_rewritten_and_an_unknown_one_refused():
    stale = "intro\n<!-- generated: sizes (x) -->\n| old |\n<!-- end generated: sizes -->\nafter\n"
    new = docs.rewrite(stale)
    assert new.startswith("intro\n<!-- generated: sizes (python -m posmix_fairseq.harness.docs) -->\n| size |")
    assert "| old |" not in new and new.endswith("<!-- end generated: sizes -->\nafter\n")
    assert docs.generated_blocks(new)[0][0] == 2
    with pytest.raises(ValueError, match="unknown generated block 'nonsense'"):
        docs.rewrite("<!-- generated: nonsense (x) -->\n<!-- end generated: nonsense -->\n")


def test_the_mixers_table_names_every_mixer_and_where_it_goes():
    table = docs.render_mixers()
    for name, entry in docs.MIXER_REGISTRY.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| `{name}` |"))
        assert row.split(" | ")[1] == ", ".join(p.name.replace("_", "-") for p in entry.placements)
