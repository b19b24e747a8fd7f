import numpy as np
import pandas as pd

df = pd.DataFrame({"g": list("abcab"), "v": np.arange(5, dtype=float)})
out = df.groupby("g")["v"].agg(["mean", "sum"])
print(out.to_string())
