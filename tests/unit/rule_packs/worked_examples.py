"""The code of a decision prompt's worked example, as the rule-pack tests run it through `verify`."""


def example_program(example: str) -> str:
    """The example's code, without its fence and import (as_decision_draft adds them)."""
    code = example[example.index("```python") + len("```python\n") : example.rindex("```")]
    return code.replace("import json\n", "", 1)
