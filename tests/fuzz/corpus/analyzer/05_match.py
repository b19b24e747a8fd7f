def classify(p):
    match p:
        case (0, 0):
            return "origin"
        case (x, 0) | (0, x):
            return f"axis {x}"
        case [x, y, *rest] if rest:
            return "long"
        case {"x": x, **others}:
            return "mapping"
        case _:
            return "other"


print(classify((0, 0)), classify((3, 0)))
