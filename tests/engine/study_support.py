"""The small study text that the study and point-set tests vary."""

BASE = """
name = "t"
seed = 3
[pred]
kind = "list"
format = "fp32"
values = ["-0x1.4p+0", "2.5", "0"]
[points]
target = [0, 1]
alpha = [0.25]
gamma = [2.0, -1.5]
[run]
variants = ["kernel", "naive"]
machines = ["ieee"]
"""


def study_with(**replace):
    text = BASE
    for old, new in replace.items():
        text = text.replace(old, new)
    return text
