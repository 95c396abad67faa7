"""The one shape of a problem with a claim: which field, which value, and what would work.

Parsing (`spec.SpecError`), sizing (`sizing.SizingError`) and the model cache
(`storage.StorageError`) raise their own kinds of it, so each layer says what went wrong in
its own terms; `compose` turns any of them into the fatal result a user reads.
"""

from __future__ import annotations


class FieldError(Exception):
    """A problem with `field` (a path in the claim), its `value`, and a `message` that says
    what would work. Given as `problem` alone, the message is `<field>: <problem>`, and a
    caller that names the field its own way (a placement reason) reads `problem`, never the
    message."""

    def __init__(
        self, field: str, value: object, message: str | None = None, *, problem: str | None = None
    ) -> None:
        if message is None:
            if problem is None:
                raise TypeError("FieldError needs a message or a problem")
            message = f"{field}: {problem}"
        super().__init__(message)
        self.field = field
        self.value = value
        self.message = message
        self.problem = problem

    def __str__(self) -> str:
        return self.message
