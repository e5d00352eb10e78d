import pandas as pd

import sparkcep


def test_v_shape_one_row_per_match():
    df = pd.DataFrame({"ts": range(10), "price": [5, 4, 3, 4, 5, 6, 5, 4, 5, 6]})
    out = sparkcep.match_recognize(df, """
        ORDER BY ts
        MEASURES A.price AS start_price, LAST(B.price) AS bottom, LAST(C.price) AS top
        PATTERN (A B+ C+)
        DEFINE B AS price < PREV(price), C AS price > PREV(price)""")
    assert out.to_dict("records") == [
        {"start_price": 5, "bottom": 3, "top": 6},
        {"start_price": 5, "bottom": 4, "top": 6},
    ]
