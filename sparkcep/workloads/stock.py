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


def trade_stream(n: int, *, symbols: int = 390, seed: int = 0, start: str = "2024-01-02 09:30:00") -> pd.DataFrame:
    """MatchRegex-style trades: ``n`` trades over ``symbols`` symbols (390 as in the paper's
    finance set), prices as per-symbol random walks (so trends and peaks occur), sizes,
    sequence numbers, one trade every 10 ms, and a running per-symbol VWAP of the last 20
    trades (the paper computes it upstream of the pattern)."""
    rng = np.random.default_rng(seed)
    sym = rng.integers(0, symbols, n)
    steps = rng.normal(0.0, 0.001, n)
    df = pd.DataFrame({"seq": np.arange(n, dtype=np.int64), "sym_id": sym, "step": steps})
    base = 20.0 + 180.0 * rng.random(symbols)
    df["price"] = np.round(base[sym] * np.exp(df.groupby("sym_id")["step"].cumsum().to_numpy()), 4)
    df["size"] = rng.integers(1, 1000, n)
    df["symbol"] = np.array([f"S{i:03d}" for i in range(symbols)])[sym]
    df["ts"] = pd.Timestamp(start) + pd.to_timedelta(np.arange(n) * 10, unit="ms")
    pv = (df["price"] * df["size"]).groupby(df["sym_id"]).transform(lambda s: s.rolling(20, min_periods=1).sum())
    vol = df["size"].groupby(df["sym_id"]).transform(lambda s: s.rolling(20, min_periods=1).sum())
    df["vwap"] = np.round(pv / vol, 4)
    return df[["seq", "symbol", "price", "size", "ts", "vwap"]]
