import statistics
data = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
print(f"mean={statistics.mean(data)}")
print(f"stdev={statistics.stdev(data):.4f}")
