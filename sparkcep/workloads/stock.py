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


def sase_ticks(n: int, *, symbols: int = 2, p_increase: float = 0.7, seed: int = 0) -> pd.DataFrame:
    """SASE's stock stream (Section 6): ``n`` ticks over ``symbols`` symbols, uniformly
    mixed; per symbol the price (an integer in [1, 1000], wrapping) rises by one with
    probability ``p_increase`` and falls or stays with (1 - p) / 2 each; volume is uniform in
    [1, 1000]; ``ts`` is the tick's position in the stream."""
    rng = np.random.default_rng(seed)
    sym = rng.integers(0, symbols, n)
    u = rng.random(n)
    step = np.where(u < p_increase, 1, np.where(u < p_increase + (1 - p_increase) / 2, -1, 0))
    df = pd.DataFrame({"ts": np.arange(n, dtype=np.int64), "sym_id": sym, "step": step})
    start = rng.integers(0, 1000, symbols)
    walk = df.groupby("sym_id")["step"].cumsum().to_numpy() + start[sym]
    df["price"] = (walk % 1000 + 1).astype(np.int64)
    df["volume"] = rng.integers(1, 1001, n)
    df["symbol"] = np.array([f"S{i}" for i in range(symbols)])[sym]
    return df[["ts", "symbol", "price", "volume"]]
