values = [0, 00, 1_000_000, 0x_FF, 0o17, 0b1010, 1e-5, 1E+10, .5, 5., 1.5j, 0j, 09.5, 1_0.0_1e1_0]
print(sum(abs(v) for v in values))
