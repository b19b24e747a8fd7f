import itertools
from collections import Counter

words = "the quick brown fox jumps over the lazy dog the end".split()
counts = Counter(words)
pairs = {(a, b) for a, b in itertools.combinations(sorted(set(words)), 2) if a[0] == b[0]}
squares = {n: n * n for n in range(10) if n % 2}
gen = (w.upper() for w in words if (l := len(w)) > 3)
print(counts.most_common(2), len(pairs), squares, list(gen))
