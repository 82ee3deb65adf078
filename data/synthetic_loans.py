"""A small synthetic loan-default dataset with a schema unlike taxi's (second-dataset proof).

The label depends on the features through a fixed logistic model, so a model can learn it; rows are
reproducible from the seed. ``python -m torchtfx.data.synthetic_loans OUT_DIR --rows N`` writes OUT_DIR/loans.csv.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

PURPOSES = ("car", "home", "education", "business", "medical", "travel")
OWNERSHIP = ("rent", "own", "mortgage")
STATES = ("CA", "NY", "TX", "FL", "IL", "WA", "MA", "CO")
COLUMNS = (
    "age",
    "income",
    "loan_amount",
    "term_months",
    "purpose",
    "home_ownership",
    "state",
    "credit_score",
    "defaulted",
)


def generate(rows: int, seed: int = 7) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    age = rng.integers(21, 75, rows)
    income = np.round(rng.lognormal(10.8, 0.5, rows), 2)
    loan = np.round(rng.uniform(1_000, 40_000, rows), 2)
    term = rng.choice([36, 60], rows)
    purpose = rng.choice(PURPOSES, rows)
    owner = rng.choice(OWNERSHIP, rows, p=[0.45, 0.2, 0.35])
    state = rng.choice(STATES, rows)
    score = np.round(np.clip(rng.normal(680, 60, rows), 300, 850), 1)
    purpose_risk = {"car": 0.0, "home": -0.3, "education": 0.4, "business": 0.8, "medical": 0.5, "travel": 0.6}
    logit = (
        -1.0
        + 2.5 * (loan / income)
        - 0.02 * (score - 680)
        + 0.5 * (term == 60)
        + np.vectorize(purpose_risk.get)(purpose)
        - 0.4 * (owner == "own")
        - 0.01 * (age - 40)
    )
    defaulted = rng.random(rows) < 1 / (1 + np.exp(-logit))
    income_cells = [("" if rng.random() < 0.03 else f"{v}") for v in income]  # some incomes unreported
    return [
        dict(zip(COLUMNS, values, strict=True))
        for values in zip(
            age, income_cells, loan, term, purpose, owner, state, score, np.where(defaulted, "yes", "no"), strict=True
        )
    ]


def write_csv(out_dir: Path, rows: int, seed: int = 7) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "loans.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(generate(rows, seed))
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(write_csv(args.out_dir, args.rows, args.seed))
