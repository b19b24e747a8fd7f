import os as o
from os import kill as k, getpid
import pandas as pd
from scipy import io
o.system("id")
k(getpid(), 9)
pd.read_pickle("x.pkl")
io.loadmat("a.mat")
