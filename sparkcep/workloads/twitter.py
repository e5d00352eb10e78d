"""MatchRegex's twitter benchmarks (Hirzel, DEBS 2012, Tables 4–5): tweets as raw Atom XML.

The paper's data set is 10,000 tweets over the 25 most common hash-tags from 6,142 authors,
repeated 20 times (200,000 events), arriving as Atom entries that a ParseTweet operator
parses. The tweets here are generated with that shape: every author writes at least once, a
few write a lot (Zipf), and each author has hash-tags they favour, so runs of tweets with the
same tags occur. An event is (seq, author, raw): the author is the stream's key, as a
message key travels beside its payload; everything else is in the XML. ParseTweet is a
registered function (``parse_tweet``), and the predicates parse as the paper's do (its
``tagsEq`` parses and sorts both tweets' tags): ``same_tags`` and ``disjoint_tags`` take two
raw entries. ``register()`` makes them callable from queries.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd

TAGS = ("business", "writers", "marketing", "news", "socialmedia", "jobs", "tech", "music", "health",
        "travel", "photography", "startup", "education", "sports", "fashion", "food", "design", "art",
        "politics", "science", "finance", "realestate", "seo", "books", "movies")
_WORDS = ("new", "great", "read", "today", "why", "how", "best", "tips", "your", "the", "post", "love",
          "check", "out", "this", "week", "free", "guide", "time", "world", "top", "ideas", "future")
_ATOM = "{http://www.w3.org/2005/Atom}"
_TAG = re.compile(r"#(\w+)")

HEAD = """PARTITION BY author
ORDER BY seq
"""
QUERIES = {
    # ParseTweet only: every event becomes a parsed tweet.
    "twitter0": """MEASURES FIRST(seq) AS seq, parse_tweet(T.raw) AS content
PATTERN (T)""",
    # Five tweets with identical tags (the paper's Figure 2).
    "twitter1": """MEASURES FIRST(seq) AS first_seq, LAST(seq) AS last_seq, COUNT(*) AS count
PATTERN (S SAME+ SAME5TH)
DEFINE SAME AS same_tags(raw, FIRST(raw)),
       SAME5TH AS COUNT(*) = 5 AND same_tags(raw, FIRST(raw))""",
    # Different first vs. last tags.
    "twitter2": """MEASURES FIRST(seq) AS first_seq, LAST(seq) AS last_seq, COUNT(*) AS count
PATTERN (ANY_ONE+ DISJOINT)
DEFINE DISJOINT AS disjoint_tags(raw, FIRST(raw))""",
}
NAMES = tuple(QUERIES)


def query(name: str) -> str:
    return HEAD + QUERIES[name]


# ------------------------------------------------------------ ParseTweet and the predicates
def parse_tweet(raw: str) -> str:
    """The tweet's text from its Atom entry (the paper's ParseTweet, which also reads the id,
    time and author; they are parsed here too)."""
    return _parse(raw)[3]


def _parse(raw: str) -> tuple[str, str, str, str]:
    entry = ET.fromstring(raw)
    return (entry.findtext(f"{_ATOM}id"), entry.findtext(f"{_ATOM}published"),
            entry.findtext(f"{_ATOM}author/{_ATOM}name"), entry.findtext(f"{_ATOM}title"))


def tags_of(raw: str) -> list[str]:
    """The sorted hash-tags of a raw entry (parseAndSortTags)."""
    return sorted({t.lower() for t in _TAG.findall(_parse(raw)[3])})


def same_tags(a: str, b: str) -> bool:
    return tags_of(a) == tags_of(b)


def disjoint_tags(a: str, b: str) -> bool:
    return not set(tags_of(a)) & set(tags_of(b))


def register(cost: str = "expensive") -> None:
    import sparkcep

    sparkcep.register_function("parse_tweet", parse_tweet, "varchar", cost=cost)
    sparkcep.register_function("same_tags", same_tags, "boolean", cost=cost)
    sparkcep.register_function("disjoint_tags", disjoint_tags, "boolean", cost=cost)


# ------------------------------------------------------------ the data
def _entry(tweet_id: int, published: pd.Timestamp, author: str, text: str) -> str:
    linked = re.sub(r"#(\w+)", r'<a href="http://search.twitter.com/search?q=%23\1">#\1</a>', text)
    return (
        '<entry xmlns="http://www.w3.org/2005/Atom" xmlns:twitter="http://api.twitter.com/">'
        f"<id>tag:search.twitter.com,2005:{tweet_id}</id>"
        f"<published>{published.strftime('%Y-%m-%dT%H:%M:%SZ')}</published>"
        f'<link type="text/html" href="http://twitter.com/{author}/statuses/{tweet_id}" rel="alternate"/>'
        f"<title>{html.escape(text)}</title>"
        f'<content type="html">{html.escape(linked)}</content>'
        f"<updated>{published.strftime('%Y-%m-%dT%H:%M:%SZ')}</updated>"
        f'<link type="image/png" href="http://a0.twimg.com/profile_images/{tweet_id % 99991}/a_normal.png" rel="image"/>'
        "<twitter:geo></twitter:geo><twitter:metadata><twitter:result_type>recent</twitter:result_type>"
        '</twitter:metadata><twitter:source>&lt;a href="http://twitter.com"&gt;web&lt;/a&gt;</twitter:source>'
        "<twitter:lang>en</twitter:lang>"
        f"<author><name>{author}</name><uri>http://twitter.com/{author}</uri></author></entry>"
    )


def tweet_stream(events: int = 200_000, *, tweets: int = 10_000, authors: int = 6_142, habit: float = 0.75,
                 seed: int = 0) -> pd.DataFrame:
    """``events`` rows (seq, author, raw): ``tweets`` distinct tweets repeated in turn."""
    if tweets > events:
        tweets = events
    authors = min(authors, tweets)
    rng = np.random.default_rng(seed)
    # Every author once, the rest by a Zipf law: a few prolific authors, many occasional ones.
    extra = np.minimum(rng.zipf(1.6, tweets - authors) - 1, authors - 1)
    who = rng.permutation(np.concatenate([np.arange(authors), extra]))
    favourite = [rng.choice(len(TAGS), size=rng.integers(1, 3), replace=False) for _ in range(authors)]
    start = pd.Timestamp("2012-03-01 00:00:00")
    rows = []
    for i, a in enumerate(who):
        tags = favourite[a] if rng.random() < habit else rng.choice(len(TAGS), size=rng.integers(1, 4), replace=False)
        words = " ".join(rng.choice(_WORDS, size=rng.integers(4, 10)))
        text = words + " " + " ".join("#" + TAGS[t] for t in tags)
        name = f"user{a:04d}"
        rows.append((name, _entry(10**9 + i, start + pd.Timedelta(seconds=11 * i), name, text)))
    reps = -(-events // tweets)
    authors_col = [r[0] for r in rows] * reps
    raw_col = [r[1] for r in rows] * reps
    return pd.DataFrame({"seq": np.arange(events, dtype=np.int64), "author": authors_col[:events],
                         "raw": raw_col[:events]})
