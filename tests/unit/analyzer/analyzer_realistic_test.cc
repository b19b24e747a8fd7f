// Code an agent writes for data work must pass the data-science profile without a single
// finding: a false positive here costs a user a wasted round trip.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyzer/analyzer.h"

namespace airlock::analyzer {
namespace {

Policy DataSciencePolicy() {
  Policy p;
  p.allowed_imports = std::vector<std::string>{
      "collections", "csv",    "datetime", "decimal",  "fractions", "functools", "itertools",
      "json",        "math",   "operator", "random",   "re",        "statistics", "string",
      "textwrap",    "typing", "numpy",    "pandas",   "scipy"};
  p.blocklist = {{"numpy", "ctypeslib"},      {"numpy", "frompyfunc"},   {"pandas", "read_pickle"},
                 {"pandas", "read_sql"},      {"pandas", "read_sql_query"},
                 {"pandas", "read_sql_table"}, {"pandas", "read_html"},  {"pandas", "read_fwf"},
                 {"pandas", "read_clipboard"}, {"pandas", "read_excel"}, {"pandas", "read_feather"},
                 {"pandas", "read_parquet"},  {"pandas", "read_orc"},    {"pandas", "read_sas"},
                 {"pandas", "read_spss"},     {"pandas", "read_stata"},  {"pandas", "read_gbq"},
                 {"pandas", "read_hdf"},      {"scipy.io", "loadmat"},   {"scipy.io", "savemat"},
                 {"scipy.io", "mmread"},      {"scipy.io", "mmwrite"}};
  return p;
}

struct Snippet {
  const char* name;
  const char* code;
};

const Snippet kSnippets[] = {
    {"pandas_groupby", R"PY(import pandas as pd
import numpy as np

df = pd.DataFrame({
    "region": ["north", "south", "north", "east", "south"],
    "sales": [120.5, 98.0, 143.2, 77.7, 101.1],
    "units": [10, 8, 12, 7, 9],
})
summary = df.groupby("region").agg(total=("sales", "sum"), avg_units=("units", "mean"))
summary["share"] = summary["total"] / summary["total"].sum()
print(summary.sort_values("total", ascending=False).round(2).to_string())
print(f"Best region: {summary['total'].idxmax()}")
)PY"},
    {"numpy_linear_algebra", R"PY(import numpy as np

rng = np.random.default_rng(42)
A = rng.normal(size=(4, 4))
b = rng.normal(size=4)
x = np.linalg.solve(A, b)
residual = np.linalg.norm(A @ x - b)
eigvals = np.linalg.eigvals(A.T @ A)
print("x =", np.round(x, 4))
print(f"residual={residual:.2e}, cond={np.linalg.cond(A):.1f}")
print("eigenvalues:", sorted(eigvals.real))
)PY"},
    {"statistics_report", R"PY(import statistics
from collections import Counter

scores = [72, 85, 90, 72, 88, 65, 90, 72, 95, 85]
report = {
    "mean": statistics.mean(scores),
    "median": statistics.median(scores),
    "stdev": round(statistics.stdev(scores), 3),
    "mode": Counter(scores).most_common(1)[0][0],
    "quartiles": statistics.quantiles(scores, n=4),
}
for key, value in report.items():
    print(f"{key:>10}: {value}")
)PY"},
    {"json_roundtrip", R"PY(import json
from datetime import datetime, timezone

records = [{"id": i, "ts": datetime(2024, 1, i + 1, tzinfo=timezone.utc).isoformat()} for i in range(3)]
payload = json.dumps({"records": records, "count": len(records)}, indent=2, sort_keys=True)
parsed = json.loads(payload)
assert parsed["count"] == 3
print(payload)
print([r["ts"][:10] for r in parsed["records"]])
)PY"},
    {"regex_log_parsing", R"PY(import re
from collections import defaultdict

LOG = """2024-03-01 12:00:01 ERROR db timeout after 30s
2024-03-01 12:00:05 INFO request served in 120ms
2024-03-01 12:01:00 ERROR cache miss storm
2024-03-01 12:02:13 WARN slow query 2.3s"""
pattern = re.compile(r"^(?P<date>\S+) (?P<time>\S+) (?P<level>[A-Z]+) (?P<msg>.*)$", re.M)
by_level = defaultdict(list)
for m in pattern.finditer(LOG):
    by_level[m.group("level")].append(m.group("msg"))
for level, msgs in sorted(by_level.items()):
    print(level, len(msgs), msgs)
)PY"},
    {"datetime_math", R"PY(from datetime import date, datetime, timedelta

start = datetime.strptime("2024-02-27 08:30", "%Y-%m-%d %H:%M")
deadlines = [start + timedelta(days=d, hours=h) for d, h in [(1, 0), (2, 6), (7, 12)]]
for d in deadlines:
    print(d.strftime("%a %d %b %Y %H:%M"), "weekend" if d.weekday() >= 5 else "weekday")
print((date(2024, 12, 25) - date(2024, 1, 1)).days, "days to Christmas")
)PY"},
    {"class_with_repr", R"PY(from typing import List, Optional


class Portfolio:
    """A tiny portfolio model."""

    def __init__(self, name: str, holdings: Optional[dict] = None) -> None:
        self.name = name
        self.holdings = holdings or {}

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(name={self.name!r}, n={len(self.holdings)})"

    def value(self, prices: dict) -> float:
        return sum(qty * prices.get(sym, 0.0) for sym, qty in self.holdings.items())

    def top(self, prices: dict, n: int = 2) -> List[str]:
        return sorted(self.holdings, key=lambda s: -self.holdings[s] * prices.get(s, 0))[:n]


p = Portfolio("demo", {"AAA": 10, "BBB": 3, "CCC": 25})
prices = {"AAA": 12.5, "BBB": 100.0, "CCC": 1.2}
print(p, p.value(prices), p.top(prices))
)PY"},
    {"main_guard_and_decorator", R"PY(import functools


def logged(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        result = func(*args, **kwargs)
        print(f"{func.__name__}{args} -> {result}")
        return result
    return wrapper


@logged
def fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


if __name__ == "__main__":
    print(fib(30))
)PY"},
    {"scipy_stats", R"PY(import numpy as np
from scipy import stats

x = np.linspace(0, 10, 50)
y = 3.2 * x + 1.5 + np.random.default_rng(0).normal(scale=2.0, size=x.size)
fit = stats.linregress(x, y)
t, p = stats.ttest_ind(y[:25], y[25:])
print(f"slope={fit.slope:.3f} intercept={fit.intercept:.3f} r2={fit.rvalue ** 2:.3f}")
print(f"t={t:.2f} p={p:.3g}", "significant" if p < 0.05 else "not significant")
)PY"},
    {"pandas_time_series", R"PY(import pandas as pd
import numpy as np

idx = pd.date_range("2024-01-01", periods=90, freq="D")
ts = pd.Series(np.sin(np.arange(90) / 7.0) * 10 + 50, index=idx, name="load")
weekly = ts.resample("W").agg(["mean", "min", "max"])
rolling = ts.rolling(window=7, min_periods=1).mean()
print(weekly.head())
print("max 7-day mean:", round(rolling.max(), 2), "on", rolling.idxmax().date())
print(pd.api.types.is_numeric_dtype(ts))
)PY"},
    {"itertools_combinatorics", R"PY(import itertools
import math

items = ["a", "b", "c", "d"]
pairs = list(itertools.combinations(items, 2))
perms = sum(1 for _ in itertools.permutations(items, 3))
grouped = {k: list(g) for k, g in itertools.groupby(sorted("mississippi"))}
print(len(pairs), perms, math.comb(4, 2), math.perm(4, 3))
print({k: len(v) for k, v in grouped.items()})
print(list(itertools.accumulate([1, 2, 3, 4], lambda acc, v: acc * v)))
)PY"},
    {"decimal_fraction_money", R"PY(from decimal import Decimal, ROUND_HALF_EVEN, getcontext
from fractions import Fraction

getcontext().prec = 28
items = [Decimal("19.99"), Decimal("5.01"), Decimal("0.10")]
subtotal = sum(items, Decimal("0"))
tax = (subtotal * Decimal("0.0825")).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
print(f"subtotal={subtotal} tax={tax} total={subtotal + tax}")
print(Fraction(3, 4) + Fraction(1, 6), float(Fraction(22, 7)))
)PY"},
    {"text_processing", R"PY(import string
import textwrap
from collections import Counter

text = """It was the best of times, it was the worst of times, it was the age of wisdom."""
words = [w.strip(string.punctuation).lower() for w in text.split()]
freq = Counter(words)
print(textwrap.fill(text, width=30))
print(freq.most_common(3))
tmpl = string.Template("$who likes $what")
print(tmpl.substitute(who="Ada", what="math"))
)PY"},
    {"operator_sorting", R"PY(import operator
from functools import reduce

people = [("ana", 31, 5.5), ("bo", 25, 6.1), ("cy", 31, 5.9)]
by_age_height = sorted(people, key=operator.itemgetter(1, 2))
names = list(map(operator.itemgetter(0), by_age_height))
product = reduce(operator.mul, [1, 2, 3, 4, 5], 1)
total_age = reduce(lambda acc, p: acc + p[1], people, 0)
upper = list(map(operator.methodcaller("upper"), names))
print(names, upper, product, total_age)
)PY"},
    {"numpy_image_like", R"PY(import numpy as np

img = np.zeros((8, 8), dtype=np.uint8)
img[2:6, 2:6] = 255
kernel = np.ones((3, 3)) / 9.0
padded = np.pad(img.astype(float), 1, mode="edge")
blurred = np.empty_like(img, dtype=float)
for i in range(img.shape[0]):
    for j in range(img.shape[1]):
        blurred[i, j] = (padded[i:i + 3, j:j + 3] * kernel).sum()
mask = np.where(blurred > 100, 1, 0)
print(mask)
print(f"{mask.mean():.2%} of pixels above threshold")
)PY"},
    {"typing_and_generators", R"PY(from typing import Dict, Iterable, Iterator, Tuple


def windows(values: Iterable[float], size: int) -> Iterator[Tuple[float, ...]]:
    buf: list = []
    for v in values:
        buf.append(v)
        if len(buf) > size:
            buf.pop(0)
        if len(buf) == size:
            yield tuple(buf)


def stats(values: Iterable[float]) -> Dict[str, float]:
    vals = list(values)
    return {"min": min(vals), "max": max(vals), "avg": sum(vals) / len(vals)}


for w in windows(range(10), 4):
    print(w, stats(w))
)PY"},
    {"pandas_merge_pivot", R"PY(import pandas as pd

orders = pd.DataFrame({"order_id": [1, 2, 3, 4], "customer": ["a", "b", "a", "c"],
                       "amount": [250.0, 80.5, 120.0, 42.0]})
customers = pd.DataFrame({"customer": ["a", "b", "c"], "segment": ["retail", "retail", "b2b"]})
merged = orders.merge(customers, on="customer", how="left")
pivot = merged.pivot_table(index="segment", values="amount", aggfunc=["sum", "count"])
big = merged.query("amount > 100")
print(pivot)
print(big[["order_id", "amount"]].to_dict(orient="records"))
print(merged.describe().loc[["mean", "std"]])
)PY"},
    {"match_and_walrus", R"PY(import json


def describe(event: dict) -> str:
    match event:
        case {"type": "click", "x": x, "y": y}:
            return f"click at {x},{y}"
        case {"type": "key", "key": str(k)} if len(k) == 1:
            return f"key {k!r}"
        case _:
            return "unknown"


events = json.loads('[{"type": "click", "x": 3, "y": 4}, {"type": "key", "key": "q"}, {}]')
while (n := len(events)) > 0:
    print(n, describe(events.pop(0)))
)PY"},
    {"random_simulation", R"PY(import random
import statistics

random.seed(7)
trials = 10_000
hits = 0
for _ in range(trials):
    x, y = random.random(), random.random()
    if x * x + y * y <= 1.0:
        hits += 1
estimate = 4 * hits / trials
samples = [random.gauss(0, 1) for _ in range(1000)]
print(f"pi ~ {estimate:.3f}; sample stdev {statistics.pstdev(samples):.3f}")
print(random.choice(["heads", "tails"]), random.sample(range(100), 5))
)PY"},
    {"csv_parse_and_aggregate", R"PY(import csv
from collections import defaultdict

raw = """city,month,rain_mm
Oslo,Jan,49
Oslo,Feb,36
Lima,Jan,1
Lima,Feb,2
"""
totals = defaultdict(int)
for row in csv.DictReader(raw.splitlines()):
    totals[row["city"]] += int(row["rain_mm"])
writer_rows = [["city", "total"]] + [[c, t] for c, t in sorted(totals.items())]
print("\n".join(",".join(map(str, r)) for r in writer_rows))
)PY"},
};

TEST(AnalyzerRealisticTest, DataScienceSnippetsHaveNoFindings) {
  Analyzer analyzer(DataSciencePolicy());
  int checked = 0;
  for (const Snippet& s : kSnippets) {
    Result r = analyzer.Analyze(s.code);
    std::string all;
    for (const Finding& f : r.findings) {
      all += "\n  " + std::to_string(f.line) + ":" + std::to_string(f.col) + " [" + f.rule + "] " +
             f.message;
    }
    EXPECT_TRUE(r.findings.empty()) << s.name << all;
    EXPECT_TRUE(r.syntax_ok) << s.name;
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

}  // namespace
}  // namespace airlock::analyzer
