from operator import itemgetter
rows = [{"open": 1.0, "input": 2}, {"open": 0.5, "input": 3}]
key = lambda r, eval=None: r["open"]
print(sorted(rows, key=key), dict(open=1, input=2), list(map(itemgetter("input"), rows)))
