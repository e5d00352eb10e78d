"""RIP's appendix queries Q1–Q12 (Balkesen et al., DEBS 2013) in sparkcep's language.

The paper gives only PATTERN and DEFINE; each query here runs over the StockTrade stream
ordered by timestamp. Obvious typesetting slips in the appendix are corrected: Q6's unbalanced
parenthesis, and Q9's ``D AS (B.price > 70 AND D.price < 130)``, read as ``D.price > 70``
(as in every other band condition of Q9). ``{tail}`` takes extra clauses such as MAXLENGTH.
"""

from __future__ import annotations

import re

_PATTERNS_AND_DEFINES = {
    "Q1": """PATTERN (A B* C D* E F* G H* I J* K L* M){tail}
DEFINE
  B AS B.price > PREV(B.price),
  C AS C.price > PREV(C.price),
  D AS D.price <= PREV(D.price),
  E AS E.price < PREV(E.price) AND E.price > A.price,
  F AS F.price > PREV(F.price),
  G AS G.price > PREV(G.price) AND G.price > C.price,
  H AS H.price <= PREV(H.price),
  I AS I.price < PREV(I.price) AND I.price > A.price,
  J AS J.price > PREV(J.price),
  K AS K.price > PREV(K.price) AND K.price < G.price,
  L AS L.price <= PREV(L.price),
  M AS M.price <= PREV(M.price) AND M.price < E.price AND M.price < I.price""",
    "Q2": """PATTERN (A B+ C){tail}
DEFINE
  A AS A.price < 70,
  B AS B.price > 80 AND B.price < 120,
  C AS C.price > 130""",
    "Q3": """PATTERN (A B+ C+ D+ E+ F){tail}
DEFINE
  B AS B.price > PREV(B.price) AND B.price > A.price,
  C AS C.price < PREV(C.price) AND C.price > A.price,
  D AS D.price > PREV(D.price) AND D.price > A.price,
  E AS E.price < PREV(E.price) AND E.price > A.price,
  F AS F.price < A.price""",
    "Q4": """PATTERN (A B* C){tail}
DEFINE
  A AS A.price < 70,
  B AS B.price > PREV(B.price) AND B.price > A.price,
  C AS C.price > PREV(C.price) AND C.price > 130""",
    "Q5": """PATTERN (A B C D E F G H I J K L M){tail}
DEFINE
  B AS B.price > PREV(B.price),
  C AS C.price > PREV(C.price),
  D AS D.price < PREV(D.price),
  E AS E.price < PREV(E.price) AND E.price > A.price,
  F AS F.price > PREV(F.price),
  G AS G.price > PREV(G.price) AND G.price > C.price,
  H AS H.price < PREV(H.price),
  I AS I.price < PREV(I.price) AND I.price > A.price,
  J AS J.price > PREV(J.price),
  K AS K.price > PREV(K.price) AND K.price < G.price,
  L AS L.price < PREV(L.price),
  M AS M.price < PREV(M.price) AND M.price < E.price AND M.price < I.price""",
    "Q6": """PATTERN (A B C D E F){tail}
DEFINE
  B AS B.price > PREV(B.price) AND B.price > A.price,
  C AS C.price < PREV(C.price) AND C.price > A.price,
  D AS D.price > PREV(D.price) AND D.price > A.price,
  E AS E.price < PREV(E.price) AND E.price > A.price,
  F AS F.price < A.price""",
    "Q7": """PATTERN (A B C){tail}
DEFINE
  A AS A.price < 70,
  B AS B.price > A.price,
  C AS C.price < B.price AND C.price < A.price""",
    "Q8": """PATTERN (A B* C+ D+ E+ F){tail}
DEFINE
  A AS A.price < 80,
  B AS B.price > 80 AND B.price < 120,
  C AS C.price < 80,
  D AS D.price > 80 AND D.price < 120,
  E AS E.price > 120,
  F AS F.price > 130""",
    "Q9": """PATTERN (A B+ C D+ E F+ G H+ I J+ K L+ M){tail}
DEFINE
  A AS A.price < 70,
  B AS B.price > 70 AND B.price < 130,
  C AS C.price > 130,
  D AS D.price > 70 AND D.price < 130,
  E AS E.price < 70,
  F AS F.price > 70 AND F.price < 130,
  G AS G.price > 130,
  H AS H.price > 70 AND H.price < 130,
  I AS I.price < 70,
  J AS J.price > 70 AND J.price < 130,
  K AS K.price > 130,
  L AS L.price > 70 AND L.price < 130,
  M AS M.price < 70""",
    "Q10": """PATTERN (A B C D E F G H I J K L M){tail}
DEFINE
  D AS D.price < 100,
  E AS E.price > 100,
  F AS F.price < 100 AND F.price > 60,
  G AS G.price > 100 AND G.price < 140,
  H AS H.price < 100 AND H.price > 70,
  I AS I.price > 100 AND I.price < 130,
  J AS J.price < 100 AND J.price > 80,
  K AS K.price > 100 AND K.price < 120,
  L AS L.price < 120 AND L.price > 80,
  M AS M.price > 80 AND M.price < 120""",
    "Q11": """PATTERN (A B C D E F){tail}
DEFINE
  A AS A.price < 80,
  B AS B.price < 90 AND B.price > 60,
  C AS C.price < 100 AND C.price > 70,
  D AS D.price < 110 AND D.price > 80,
  E AS E.price < 120 AND E.price > 90,
  F AS F.price < 130 AND F.price > 100""",
    "Q12": """PATTERN (A B C){tail}
DEFINE
  A AS A.price < 90,
  B AS B.price > 110,
  C AS C.price < 90""",
}

NAMES = tuple(_PATTERNS_AND_DEFINES)


def query(name: str, *, measures: str = "MATCH_NUMBER() AS match_no, FIRST(tradeId) AS first_trade, "
          "LAST(tradeId) AS last_trade, COUNT(*) AS length",
          skip: str = "", maxlength: int | None = None, partition_by: str | None = None) -> str:
    """The text of RIP query ``name`` ("Q1".."Q12") over the StockTrade stream."""
    tail = f" MAXLENGTH {maxlength}" if maxlength is not None else ""
    body = _PATTERNS_AND_DEFINES[name].format(tail=tail)
    partition = f"PARTITION BY {partition_by}\n" if partition_by else ""
    return f"{partition}ORDER BY timestamp, tradeId\nMEASURES {measures}\n{skip}\n{body}"


def user_measures(name: str) -> str:
    """MEASURES as users write them for query ``name``: values of named variables' rows
    (the first variable's first trade, the last variable's last one), an aggregate of the
    second variable's rows, the match's length."""
    pattern = _PATTERNS_AND_DEFINES[name].split("\n", 1)[0]
    names = re.findall(r"\b([A-Z])\b", pattern[len("PATTERN"):])
    return (f"FIRST({names[0]}.tradeId) AS first_trade, LAST({names[-1]}.tradeId) AS last_trade, "
            f"MIN({names[1]}.price) AS low, COUNT(*) AS length")
