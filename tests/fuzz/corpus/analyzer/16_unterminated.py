x = """never closed
print(x)
