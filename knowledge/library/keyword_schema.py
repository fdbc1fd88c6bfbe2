"""What a keyword index is made of: FTS5's own analyzer reached through apsw (:func:`analyze`), the tantivy
schema, and the stamp document that says which rows an index holds (:mod:`knowledge.library.keyword_file`
keeps the indexes; this module only says what is in one)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import apsw
import tantivy

from knowledge.library.vector_format import BaseKey

FORMAT = 1
ANALYZER = "fts5:porter unicode61 remove_diacritics 2"  # what cut the tokens (a change rebuilds every index)
TOKENIZER = "quire_fts5"  # tantivy's name for "split on whitespace": the text arrives analyzed
STAMP_ID = 0
_TOKENIZERS = threading.local()


# -- the analyzer ---------------------------------------------------------------------------------


def analyze(value: str, *, query: bool = False) -> list[str]:
    """``value`` cut into FTS5's tokens (lowercased, accents folded, Porter-stemmed), in order."""
    tokenizer = getattr(_TOKENIZERS, "fts5", None)
    if tokenizer is None:  # one per thread: an apsw connection serialises its callers
        memory = apsw.Connection(":memory:")
        tokenizer = memory.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
        _TOKENIZERS.connection, _TOKENIZERS.fts5 = memory, tokenizer
    reason = apsw.FTS5_TOKENIZE_QUERY if query else apsw.FTS5_TOKENIZE_DOCUMENT
    tokens = tokenizer(
        value.encode("utf-8", "surrogatepass"), reason, None, include_offsets=False, include_colocated=False
    )
    return [str(t) for t in tokens]


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("id", indexed=True, fast=True)
    builder.add_integer_field("item", indexed=True)
    builder.add_text_field("text", tokenizer_name=TOKENIZER, index_option="position")
    builder.add_text_field("stamp", stored=True, tokenizer_name="raw", index_option="basic")
    return builder.build()


SCHEMA = _schema()


def prepared(index: tantivy.Index) -> tantivy.Index:
    """Custom tokenizers are not stored with an index: register ours on every open."""
    index.register_tokenizer(TOKENIZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
    index.config_reader(reload_policy="Manual")  # reloads happen under our lock, never on a timer
    return index


# -- the stamp --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stamp:
    key: BaseKey
    version: int  # the base's vectors_version in the snapshot the index was brought up to
    last_id: int  # the highest chunk id added (0: none)
    last_sha: str = ""  # that chunk's text hash, to tell this history from another
    format: int = FORMAT
    analyzer: str = ANALYZER

    def dumps(self) -> str:
        k = self.key
        fields = {"format": self.format, "analyzer": self.analyzer, "base_id": k.base_id}
        fields |= {"created_at": k.created_at, "dimension": k.dimension, "version": self.version}
        return json.dumps(fields | {"last_id": self.last_id, "last_sha": self.last_sha})

    @classmethod
    def loads(cls, raw: str) -> Stamp | None:
        try:
            d = json.loads(raw)
            key = BaseKey(int(d["base_id"]), float(d["created_at"]), int(d["dimension"]))
            return cls(
                key, int(d["version"]), int(d["last_id"]), str(d["last_sha"]), int(d["format"]), str(d["analyzer"])
            )
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class Opened:
    """An open index whose reader sees the commit its stamp describes."""

    index: tantivy.Index
    stamp: Stamp

    @property
    def version(self) -> int:
        return self.stamp.version

    def searcher(self) -> tantivy.Searcher:
        return self.index.searcher()

    def documents(self) -> int:
        """Live chunk documents (the stamp left out)."""
        return max(0, int(self.index.searcher().num_docs) - 1)


def read_stamp(index: tantivy.Index) -> Stamp | None:
    searcher = index.searcher()
    hits = searcher.search(tantivy.Query.term_query(SCHEMA, "id", STAMP_ID), 1, count=False).hits
    if not hits:
        return None
    values = searcher.doc(hits[0][1]).to_dict().get("stamp") or []
    return Stamp.loads(str(values[0])) if values else None


def write_stamp(writer: tantivy.IndexWriter, stamp: Stamp) -> None:
    writer.delete_documents_by_term("id", STAMP_ID)
    writer.add_document(tantivy.Document(id=STAMP_ID, stamp=stamp.dumps()))
