"""Queries the encoder tests ask: two SciFact claims and one with accents, upper case, punctuation and a tail past
the model's 256 tokens (truncated)."""

QUERIES = [
    "0-dimensional biomaterials lack inductive properties.",
    "ALDH1 expression is associated with poorer prognosis for breast cancer primary tumors.",
    "Ánother query, with UPPER case, punctuation — and a very long tail " + "word " * 300,
]
