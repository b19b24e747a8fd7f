name, width, prec = "pi", 10, 3
value = 3.14159
print(f"{name!r:>{width}} = {value:{width}.{prec}f}")
print(f"{'nested ' + f'{value:.1f}'}", f"{{literal}}", f'''{
    value * 2
}''')
print(rf"\d{value}", Rb'\x00', F"{value=}", f"{value = :.2f}")
