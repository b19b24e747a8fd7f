value = 1
print(f"{value!x}")
