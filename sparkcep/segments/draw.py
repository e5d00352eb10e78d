"""A segment plan as a picture: the operator tree, each operator with its estimated output
cardinality and cost (per series) where the optimizer gave them."""

from __future__ import annotations

from sparkcep.errors import SparkCepError
from sparkcep.segments.executor import Operator


def draw_plan(root: Operator | None, names: tuple[str, ...], path: str, model=None, n: float = 1.0,
              title: str = "segment plan") -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes: list[tuple[Operator, int, float]] = []  # (operator, depth, x)
    leaves = [0]

    def place(op: Operator, depth: int) -> float:
        if not op.children:
            x = float(leaves[0])
            leaves[0] += 1
        else:
            xs = [place(c, depth + 1) for c in op.children]
            x = sum(xs) / len(xs)
        nodes.append((op, depth, x))
        return x

    if root is not None:
        place(root, 0)
    depth = max((d for _, d, _ in nodes), default=0)
    fig, ax = plt.subplots(figsize=(max(4.0, 2.6 * leaves[0]), 1.6 * (depth + 1) + 0.8))
    where = {id(op): (x, -d) for op, d, x in nodes}
    for op, d, x in nodes:
        for c in op.children:
            cx, cy = where[id(c)]
            ax.plot([x, cx], [-d, cy], color="0.6", lw=1, zorder=1)
    for op, d, x in nodes:
        text = op.label(names)
        if model is not None:
            card, cost = model.estimate(op, n, n)
            text += f"\n~{card:,.0f} segments, {cost / 1e6:,.2f} ms"  # over a whole series
        ax.text(x, -d, text, ha="center", va="center", fontsize=8, zorder=2,
                bbox={"boxstyle": "round", "fc": "#e8f0fe" if op.children else "#fef3e0", "ec": "0.5"})
    if root is None:
        ax.text(0.5, 0.5, "(matches nothing)", ha="center")
    ax.set_title(title, fontsize=10)
    ax.axis("off")
    ax.margins(0.15, 0.3)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except (OSError, ValueError) as e:  # a missing folder, no permission, an unknown extension
        raise SparkCepError(f"cannot write the picture to {path!r}: {e}") from None
    finally:
        plt.close(fig)
    return path
