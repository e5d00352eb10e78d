"""Seeded time series for T-REX's templates (its Appendix E datasets are not shipped; these
generators stand in for them, documented here):

- ``stocks``: ``tickers`` × ``days`` daily opening prices, a geometric random walk whose drift
  switches between rising, falling and flat regimes every 5..30 days (SP500-like: 503 × 252);
- ``weather``: ``cities`` × ``days`` daily temperatures: a yearly sine (amplitude 12 °C), an
  AR(1) anomaly and, now and then, a cold wave (a 1..5 day drop of 15..30 °C that recovers);
- ``covid``: ``counties`` × ``weeks`` weekly case counts: waves (Gaussian bumps) of random
  height on a Poisson floor;
- ``taxi``: ``slots`` half-hour ride counts with a daily profile (one broad midday peak, ten
  times the night's level) times a weekly factor, Poisson noise;
- ``bars``: minute bars of a few tickers (open, peak, close), a random walk per ticker.
Timestamps are integers (days, weeks, slots or minutes), as in the templates' schemas.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def stocks(tickers: int = 503, days: int = 252, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    cols = {"ticker": [], "tstamp": [], "price": []}
    for k in range(tickers):
        drift = np.zeros(days)
        d = 0
        while d < days:
            length = int(rng.integers(5, 31))
            drift[d:d + length] = rng.choice([-0.012, 0.0, 0.012])
            d += length
        price = 50 * np.exp(np.cumsum(drift + rng.normal(0, 0.01, size=days)))
        cols["ticker"] += [f"T{k:03d}"] * days
        cols["tstamp"] += list(range(days))
        cols["price"] += [round(float(x), 2) for x in price]
    return pa.table(cols)


def weather(cities: int = 36, days: int = 1854, seed: int = 2) -> pa.Table:
    rng = np.random.default_rng(seed)
    cols = {"city": [], "tstamp": [], "temp": []}
    t = np.arange(days)
    for c in range(cities):
        season = 12 * np.sin(2 * np.pi * (t - 100) / 365.0) + rng.normal(15, 5)
        anomaly = np.zeros(days)
        for i in range(1, days):
            anomaly[i] = 0.8 * anomaly[i - 1] + rng.normal(0, 1.5)
        temp = season + anomaly
        for start in rng.choice(days - 40, size=max(days // 120, 1), replace=False):
            depth, length = rng.uniform(15, 30), int(rng.integers(1, 6))
            temp[start:start + length] -= np.linspace(depth / length, depth, length)
            temp[start + length:start + length + 10] -= np.linspace(depth, 0, 10)
        cols["city"] += [f"C{c:02d}"] * days
        cols["tstamp"] += t.tolist()
        cols["temp"] += [round(float(x), 1) for x in temp]
    return pa.table(cols)


def covid(counties: int = 3342, weeks: int = 64, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    cols = {"county": [], "tstamp": [], "confirmed": []}
    t = np.arange(weeks)
    for c in range(counties):
        level = np.full(weeks, rng.uniform(2, 20))
        for _ in range(int(rng.integers(1, 4))):
            mid, width, height = rng.uniform(0, weeks), rng.uniform(2, 8), rng.uniform(20, 400)
            level += height * np.exp(-0.5 * ((t - mid) / width) ** 2)
        cols["county"] += [f"K{c:04d}"] * weeks
        cols["tstamp"] += t.tolist()
        cols["confirmed"] += (rng.poisson(level) + 1).tolist()
    return pa.table(cols)


def taxi(slots: int = 10320, seed: int = 4) -> pa.Table:
    rng = np.random.default_rng(seed)
    t = np.arange(slots)
    hour = (t % 48) / 2.0
    daily = 150 + 1500 * np.exp(-0.5 * ((hour - 13.0) / 3.5) ** 2)
    weekly = 1.0 + 0.15 * np.sin(2 * np.pi * t / (48 * 7))
    return pa.table({"tstamp": t, "rides": rng.poisson(daily * weekly)})


def bars(minutes: int = 20_000, tickers: tuple[str, ...] = ("GOOG", "AAPL", "MSFT"), seed: int = 5) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = minutes
    ticker = rng.choice(tickers, size=n)
    price = {k: 100.0 for k in tickers}
    opens, peaks, closes = [], [], []
    for k in ticker:
        o = price[k]
        c = o * float(np.exp(rng.normal(0, 0.002)))
        opens.append(round(o, 3))
        peaks.append(round(max(o, c) * (1 + abs(float(rng.normal(0, 0.001)))), 3))
        closes.append(round(c, 3))
        price[k] = c
    return pa.table({"tstamp": np.arange(n), "ticker": ticker, "open": opens, "peak": peaks, "close": closes})
