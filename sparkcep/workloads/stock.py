"""RIP's synthetic StockTrade stream: tradeId, symbol, price uniform in [50, 150], timestamp."""

from __future__ import annotations

import numpy as np
import pandas as pd


def stock_trades(n: int, *, symbols: int = 1, seed: int = 0, start: str = "2024-01-02 09:30:00") -> pd.DataFrame:
    """``n`` trades, one per second, over ``symbols`` symbols chosen uniformly at random."""
    rng = np.random.default_rng(seed)
    names = np.array([f"S{i:03d}" for i in range(symbols)])
    return pd.DataFrame({
        "tradeId": np.arange(1, n + 1, dtype=np.int64),
        "symbol": names[rng.integers(0, symbols, n)] if symbols > 1 else np.repeat(names, n),
        "price": np.round(rng.uniform(50.0, 150.0, n), 2),
        "timestamp": pd.Timestamp(start) + pd.to_timedelta(np.arange(n), unit="s"),
    })
