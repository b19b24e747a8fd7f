名前 = "世界"
π = 3.14159
greeting = f"こんにちは、{名前}！ π≈{π:.2f}"
print(greeting, len(名前))
