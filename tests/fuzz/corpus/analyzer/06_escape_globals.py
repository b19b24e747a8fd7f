g = globals()
b = g['__builtins__']
imp = b['__import__'] if isinstance(b, dict) else b.__import__
print(imp('os').getcwd())
